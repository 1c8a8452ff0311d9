package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"arborist/engine/model/modeltest"
)

// TestLogitsAndGenerateIDs: on a conformance-kit model, `logits` prints
// llama.cpp's top logits per position (within the kit's 1e-4) and
// `generate --ids --print-ids` its greedy continuation.
func TestLogitsAndGenerateIDs(t *testing.T) {
	dir := modeltest.Shared(t, "conformance")
	f, err := os.Open(filepath.Join(dir, "ref.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ref struct {
		Model  string         `json:"model"`
		IDs    []int          `json:"ids"`
		Top    [][][2]float64 `json:"top"`
		Greedy []int          `json:"greedy"`
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &ref); err != nil {
			t.Fatal(err)
		}
		if ref.Model == "llama31-rope8.gguf" && len(ref.IDs) == 16 {
			break
		}
	}
	if ref.Model != "llama31-rope8.gguf" {
		t.Fatal("no 16-id line for llama31-rope8.gguf in ref.jsonl")
	}
	model := filepath.Join(dir, "models", ref.Model)
	ids := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(ref.IDs)), ","), "[]")

	code, out, errs := run(t, "logits", "--model", model, "--ids", ids, "--top", "8", "--threads", "1")
	if code != 0 {
		t.Fatalf("logits: exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(ref.IDs) {
		t.Fatalf("logits printed %d lines for %d ids", len(lines), len(ref.IDs))
	}
	for i, l := range lines {
		var got struct {
			Pos int          `json:"pos"`
			Top [][2]float64 `json:"top"`
		}
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
		if got.Pos != i || len(got.Top) != 8 {
			t.Fatalf("line %d: pos %d, %d pairs", i, got.Pos, len(got.Top))
		}
		for k, p := range got.Top {
			if p[0] != ref.Top[i][k][0] || math.Abs(p[1]-ref.Top[i][k][1]) > 1e-4 {
				t.Fatalf("position %d, rank %d: got %v, reference %v", i, k, p, ref.Top[i][k])
			}
		}
	}

	code, out, errs = run(t, "generate", "--model", model, "--ids", ids, "-n", fmt.Sprint(len(ref.Greedy)), "--temp", "0", "--print-ids", "--threads", "1")
	if code != 0 {
		t.Fatalf("generate --ids: exit %d: %s", code, errs)
	}
	if want := strings.Trim(fmt.Sprint(ref.Greedy), "[]"); strings.TrimSpace(out) != want {
		t.Fatalf("generate --ids --print-ids:\n got %s\nwant %s", strings.TrimSpace(out), want)
	}
	for _, bad := range [][]string{
		{"logits", "--model", model},
		{"logits", "--model", model, "--ids", "1,x"},
		{"logits", "--model", model, "--ids", "1,512"},
		{"generate", "--model", model, "--ids", "1,2", "--prompt", "hi"},
	} {
		if code, _, _ := run(t, bad...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", bad, code)
		}
	}
}
