package cli

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"arborist/engine/model/modeltest"
)

// TestJSON: run, tune, profile and runs print one JSON document with the
// documented fields, and a plan from tune --json runs as it is.
func TestJSON(t *testing.T) {
	dir := modeltest.ModelsDir(t)
	target := filepath.Join(dir, "stories260K.gguf")
	db := filepath.Join(t.TempDir(), "j.db")
	decode := func(args ...string) map[string]any {
		t.Helper()
		code, out, stderr := run(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v: not one JSON document: %v\n%s", args, err, out)
		}
		return doc
	}
	doc := decode("run", "--target", target, "--draft-ngram", "3", "--strategy", "chain", "--gamma", "3", "--prompt", "Once upon a time",
		"-n", "24", "--baseline", "--json", "--db", db)
	totals, _ := doc["totals"].(map[string]any)
	if totals["tokens"] != 24.0 || totals["tokens_per_s"] == nil || doc["baseline"] == nil || doc["identical_to_baseline"] != true || doc["run_id"] != 1.0 {
		t.Errorf("run --json: %v", doc)
	}
	if rounds, _ := doc["round_speedups"].([]any); len(rounds) != 3 {
		t.Errorf("run --json: round_speedups %v", doc["round_speedups"])
	}
	if plan, _ := doc["plan"].(map[string]any); plan["strategy"] != "chain" || plan["gamma"] != 3.0 || plan["w_max"] != nil {
		t.Errorf("run --json plan: %v", doc["plan"])
	}
	doc = decode("profile", "--target", target, "--draft-ngram", "3", "--max-w", "4", "--json", "--db", db)
	if v, _ := doc["verify"].(map[string]any); v == nil || len(v["points"].([]any)) != 4 || doc["limits"] == nil {
		t.Errorf("profile --json: %v", doc)
	}
	// passes of 2 and 4 sequences (8 is past --max-w 4), one curve each
	if fam, _ := doc["verify_family"].([]any); len(fam) != 2 || fam[1].(map[string]any)["seqs"] != 4.0 {
		t.Errorf("profile --json family: %v", doc["verify_family"])
	}
	doc = decode("tune", "--target", target, "--draft-ngram", "3", "--alpha", "0.6", "--top", "3", "--concurrency", "1,4", "--json", "--db", db)
	plans, _ := doc["plans"].([]any)
	if len(plans) != 3 || doc["plan_id"] != 1.0 || doc["acceptance"] != "assumed values" {
		t.Fatalf("tune --json: %v", doc)
	}
	if p, _ := plans[0].(map[string]any); p["context"] == nil {
		t.Errorf("tune --json: no context range: %v", plans[0])
	}
	loads, _ := doc["loads"].([]any)
	if doc["concurrency"] != 4.0 || len(loads) != 2 {
		t.Fatalf("tune --json concurrency: %v, %v", doc["concurrency"], doc["loads"])
	}
	if lv, _ := loads[1].(map[string]any); lv["concurrency"] != 4.0 || len(lv["ranked"].([]any)) != 3 || lv["ranked"].([]any)[0].(map[string]any)["tokens_per_s"].(float64) <= 0 {
		t.Errorf("tune --json at 4: %v", loads[1])
	}
	code, out, stderr := run(t, "runs", "--json", "--db", db)
	var runs []map[string]any
	if err := json.Unmarshal([]byte(out), &runs); code != 0 || err != nil || len(runs) != 1 || runs[0]["strategy"] != "chain" || runs[0]["measured_speedup"].(float64) <= 0 {
		t.Errorf("runs --json: %d %v %s %s", code, err, out, stderr)
	}
}
