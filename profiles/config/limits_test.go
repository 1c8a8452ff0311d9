package config

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"arborist/engine/tree"
)

// TestConfigLimits: every
// size is bounded and every float finite before a plan is built, and the
// error names the file and the field.
func TestConfigLimits(t *testing.T) {
	if _, err := Parse("ok.yaml", []byte(goodConfig)); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ yaml, want string }{
		"gamma 1e9":        {strings.Replace(goodConfig, "gamma: 4", "gamma: 1e9", 1), "speculation.gamma"},
		"tree widths":      {strings.Replace(goodConfig, "strategy: chain, gamma: 4", "strategy: tree, widths: [1000, 1000, 1000]", 1), "speculation.widths"},
		"NaN temperature":  {strings.Replace(goodConfig, "temperature: 0.5", "temperature: .nan", 1), "sampling.temperature"},
		"inf top_p":        {strings.Replace(goodConfig, "top_p: 1", "top_p: .inf", 1), "sampling.top_p"},
		"threads":          {strings.Replace(goodConfig, "threads: 1", "threads: 1000000", 1), "models.target.threads"},
		"second document":  {goodConfig + "---\nspeculation: {strategy: ar}\n", "second YAML document"},
		"egt width":        {strings.Replace(goodConfig, "strategy: chain, gamma: 4", "strategy: egt, egt_widths: [1, 100000], branch: 2, w_max: 8", 1), "egt_widths"},
		"max_seq_len huge": {strings.Replace(goodConfig, "threads: 1", "threads: 1, max_seq_len: 1000000000", 1), "max_seq_len"},
	} {
		_, err := Parse("plan.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "plan.yaml") {
			t.Errorf("%s: err = %v, want one naming plan.yaml and %q", name, err, c.want)
		}
	}
}

// FuzzParseConfig checks properties of the config reader, not only that it
// does not panic: a config it accepts passes Validate, re-encodes with
// Marshal, parses back to the same Config (the same plan), and its tree
// shape can be built within the node budget.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("models: {target: {path: t.gguf}, draft: {kind: model, path: d.gguf}}\nspeculation: {strategy: egt, egt_widths: [1,2], branch: 2, w_max: 4}\n"))
	f.Add([]byte("speculation:\n  strategy: tree\n  widths: [3, -1]\n"))
	f.Add([]byte("models: {target: {path: ../t.gguf}, draft: {kind: ngram, ngram: 3}}\nspeculation: {strategy: tree, widths: [4, 2, 2]}\nsampling: {temperature: 0.7, top_p: 0.9, seed: 7}\n"))
	f.Add([]byte(goodConfig))
	f.Add([]byte(goodConfig + "---\n{}\n"))
	f.Add([]byte("{"))
	f.Add([]byte(goodConfig + "predicted: {speedup: .nan, aal: 2}\n"))
	f.Add([]byte(strings.Replace(goodConfig, "temperature: 0.5", "temperature: 1e300", 1)))
	f.Add([]byte(strings.Replace(goodConfig, "gamma: 4", "gamma: 2.5", 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if len(err.Error()) > 4096 {
				t.Fatalf("a %d-byte message for a %d-byte config", len(err.Error()), len(data))
			}
			return
		}
		// every number an accepted config holds is finite and in range,
		// every size within what one verification pass takes
		sm, s := c.Sampling, c.Speculation
		for _, v := range []float64{sm.Temperature, sm.TopP, sm.MinP, s.DepthMin} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("accepted a non-finite or negative number: %+v %+v", sm, s)
			}
		}
		if sm.Temperature > 100 || sm.TopP > 1 || sm.MinP > 1 || s.DepthMin > 1 {
			t.Fatalf("accepted sampling out of range: %+v", sm)
		}
		if p := c.Predicted; p != nil && (math.IsNaN(p.Speedup) || math.IsInf(p.Speedup, 0) || p.Speedup < 0 || math.IsNaN(p.AAL) || math.IsInf(p.AAL, 0)) {
			t.Fatalf("accepted predicted %+v", p)
		}
		for _, n := range []int{s.Gamma, s.Branch, s.WMax, s.MaxSeqs, len(s.EGT), len(s.Widths), len(s.Parents)} {
			if n > tree.MaxNodes {
				t.Fatalf("accepted a size %d above %d: %+v", n, tree.MaxNodes, s)
			}
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config fails validation: %v", err)
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatalf("accepted config does not re-encode: %v", err)
		}
		c2, err := Parse("fuzz.yaml", out)
		if err != nil {
			t.Fatalf("re-encoded config is refused: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("re-encoded config differs:\n%+v\n%+v\n%s", c, c2, out)
		}
		if len(c.Speculation.Widths) > 0 {
			if _, err := tree.FromWidths(c.Speculation.Widths); err != nil {
				t.Fatalf("accepted widths cannot be built: %v", err)
			}
		}
	})
}

const goodConfig = "models: {target: {path: t.gguf, threads: 1}, draft: {kind: model, path: d.gguf}}\nspeculation: {strategy: chain, gamma: 4}\nsampling: {temperature: 0.5, top_p: 1}\n"

// TestHugeMappingRefusedEarly: a config.yaml of 150,000 keys (within its
// 1 MiB) took minutes to decode and gave an 8 MB error naming every key.
// Its shape is bounded before it is decoded, with a short error naming
// the line; a long list too.
func TestHugeMappingRefusedEarly(t *testing.T) {
	var b strings.Builder
	b.WriteString("models: {target: {path: /m/t.gguf}, draft: {kind: none}}\nspeculation: {strategy: ar}\nsampling:\n")
	for i := 0; b.Len() < MaxBytes-64; i++ {
		fmt.Fprintf(&b, "  k%x: 1\n", i)
	}
	_, err := Parse("big.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "line 4: a mapping of") || len(err.Error()) > 200 {
		t.Errorf("a mapping of 100,000 keys: %.300v", err)
	}
	b.Reset()
	b.WriteString("models: {target: {path: /m/t.gguf}, draft: {kind: none}}\nspeculation:\n  strategy: sequoia\n  parents:\n")
	for i := 0; i < 5000; i++ {
		b.WriteString("  - -1\n")
	}
	if _, err := Parse("long.yaml", []byte(b.String())); err == nil || !strings.Contains(err.Error(), "a list of 5000 elements") {
		t.Errorf("a list of 5000: %.300v", err)
	}
	// the negative control: a mapping of a few unknown keys is still
	// refused by the decoder, naming the key
	if _, err := Parse("few.yaml", []byte("models: {target: {path: /m/t.gguf}, draft: {kind: none}}\nspeculation: {strategy: ar}\nsampling: {k1: 1}\n")); err == nil || !strings.Contains(err.Error(), "k1") {
		t.Errorf("one unknown key: %v", err)
	}
}
