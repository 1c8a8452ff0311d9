package profiles

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"arborist/engine/model/modeltest"
	"arborist/profiles/config"
	"arborist/profiles/costmodel"
	"arborist/profiles/hardware"
	"arborist/profiles/pairs"
)

// TestEveryConfigFieldIsRead: config.yaml is a contract. For every field
// of the format (walked from the Config type, so a field added later is
// covered or fails here), a replay of an exported config either reads it
// (another value changes what runs, or what the run is told) or refuses
// the value with the field's name; none is written and then ignored.
func TestEveryConfigFieldIsRead(t *testing.T) {
	ctx := context.Background()
	target := modeltest.Stories260K(t)
	other := filepath.Join(t.TempDir(), "same.gguf")
	b, _ := os.ReadFile(target)
	os.WriteFile(other, b, 0o644)
	dir := t.TempDir()
	base := config.New(pairs.Spec{Target: target, NGram: 2}, config.HardwareOf(hardware.DetectHardware()), 2, 2048, "F32",
		costmodel.Prediction{Plan: Plan{Strategy: "duo", Gamma: 4, MaxSeqs: 2}, Speedup: 1.5, AAL: 2.5})
	base.Predicted.MeasuredOn = "calibration 1"
	allowChanged := true
	replayOf := func(c *config.Config) (*replay, error) {
		data, err := yaml.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "c.yaml")
		os.WriteFile(path, data, 0o644)
		return loadReplay(ctx, path, "", allowChanged)
	}
	want, err := replayOf(base)
	if err != nil {
		t.Fatalf("the exported config: %v", err)
	}
	// a value for each field other than the exported one
	other2 := map[string]any{
		"arborist_version":             "0.0.9",
		"hardware.cpu_cores":           97,
		"hardware.cpu":                 "Another CPU",
		"hardware.gpu_type":            "NVIDIA H200",
		"hardware.cpu_affinity":        "zero to three",
		"models.target.path":           other,
		"models.target.sha256":         strings.Repeat("ab", 32),
		"models.target.device":         "nodevice",
		"models.target.precision":      "Q4_K",
		"models.target.max_seq_len":    512,
		"models.target.threads":        1,
		"models.target.kv_cache":       "f16",
		"models.draft.kind":            "layers",
		"models.draft.path":            other,
		"models.draft.drafter_id":      7,
		"models.draft.sha256":          strings.Repeat("cd", 32),
		"models.draft.ngram":           3,
		"models.draft.layers":          2,
		"models.draft.device":          "nodevice",
		"models.draft.quant":           "banana",
		"models.draft.threads":         1,
		"optimization.draft_budget":    "banana",
		"optimization.max_sequences":   8,
		"optimization.warmup_steps":    50,
		"sampling.temperature":         0.8,
		"sampling.top_k":               5,
		"sampling.top_p":               0.9,
		"sampling.min_p":               0.1,
		"sampling.seed":                9,
		"serving.concurrency":          4,
		"serving.policy":               "adaptive",
		"serving.speculation_stops_at": 8,
		"predicted.speedup":            2.5,
		"predicted.aal":                3.5,
		"predicted.measured_on":        "calibration 2",
		"speculation.strategy":         "chain",
		"speculation.gamma":            3,
		"speculation.max_seqs":         4,
		"speculation.widths":           []int{2, 1},
		"speculation.parents":          []int{-1, 0},
		"speculation.egt_widths":       []int{1, 2},
		"speculation.branch":           3,
		"speculation.w_max":            5,
		"speculation.pad":              true,
		"speculation.aot":              true,
		"speculation.tail":             2,
		"speculation.depth_policy":     "threshold",
		"speculation.depth_min":        0.3,
		"speculation.predictor_id":     4,
		"speculation.sample_children":  true,
		// alone, each leaves the measured llama.cpp setting incomplete
		"runtimes.llama_cpp.version":          "b7000",
		"runtimes.llama_cpp.speculate":        true,
		"runtimes.llama_cpp.draft_max":        3,
		"runtimes.llama_cpp.draft_p_min":      0.5,
		"runtimes.llama_cpp.measured_speedup": 1.2,
		"runtimes.llama_cpp.measured_low":     1.1,
		"runtimes.llama_cpp.measured_high":    1.3,
	}
	var walk func(t reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			v, ok := other2[path]
			if !ok {
				t.Errorf("config.yaml field %s: no case here (add one)", path)
				return
			}
			var doc map[string]any
			data, _ := yaml.Marshal(base)
			yaml.Unmarshal(data, &doc)
			set(doc, strings.Split(path, "."), v)
			data, _ = yaml.Marshal(doc)
			var c config.Config
			if err := yaml.Unmarshal(data, &c); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			allowChanged = !strings.HasSuffix(path, ".sha256") // a hash is read by refusing another file
			got, err := replayOf(&c)
			allowChanged = true
			if err != nil {
				if !strings.Contains(err.Error(), "invalid config") && !strings.Contains(err.Error(), "sha256") {
					t.Errorf("%s = %v refused without naming a field: %v", path, v, err)
				}
				return // refused: read and checked
			}
			if reflect.DeepEqual(got, want) {
				t.Errorf("config.yaml field %s = %v changes nothing a replay runs or says", path, v)
			}
			return
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			p := name
			if path != "" {
				p = path + "." + name
			}
			walk(f.Type, p)
		}
	}
	walk(reflect.TypeOf(config.Config{}), "")
}

func set(doc map[string]any, keys []string, v any) {
	for _, k := range keys[:len(keys)-1] {
		next, ok := doc[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			doc[k] = next
		}
		doc = next
	}
	doc[keys[len(keys)-1]] = v
}
