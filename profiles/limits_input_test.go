package profiles

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"arborist/engine/tree"
	"arborist/profiles/hardware"
)

const goodConfig = "models: {target: {path: t.gguf, threads: 1}, draft: {kind: model, path: d.gguf}}\nspeculation: {strategy: chain, gamma: 4}\nsampling: {temperature: 0.5, top_p: 1}\n"

// TestConfigLimits is issue 17 items 1, 8 and 11 at the config level: every
// size is bounded and every float finite before a plan is built, and the
// error names the file and the field.
func TestConfigLimits(t *testing.T) {
	if _, err := ParseConfig("ok.yaml", []byte(goodConfig)); err != nil {
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
		_, err := ParseConfig("plan.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "plan.yaml") {
			t.Errorf("%s: err = %v, want one naming plan.yaml and %q", name, err, c.want)
		}
	}
}

// TestCheckRoom is issue 17 item 8: run -n 1e9 silently stopped at the
// context, and huge values overflowed into negative sizes in messages.
func TestCheckRoom(t *testing.T) {
	if err := hardware.CheckRoom(10, 100, 512); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][3]int{{10, 1_000_000_000, 512}, {500, 100, 512}, {1, 1<<63 - 1, 512}, {1 << 62, 1 << 62, 512}} {
		err := hardware.CheckRoom(c[0], c[1], c[2])
		if err == nil || strings.Contains(err.Error(), "-") {
			t.Errorf("CheckRoom%v = %v", c, err)
		}
	}
	if err := hardware.CheckThreads("--threads", 1000000); err == nil || !strings.Contains(err.Error(), "logical cores") {
		t.Errorf("a million threads: %v", err)
	}
	if err := hardware.CheckThreads("--threads", 1); err != nil {
		t.Error(err)
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
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("fuzz.yaml", data)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config fails validation: %v", err)
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatalf("accepted config does not re-encode: %v", err)
		}
		c2, err := ParseConfig("fuzz.yaml", out)
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

// TestLongPromptLine is issue 17 item 11: a prompt line over the scanner's
// limit gave "bufio.Scanner: token too long" without the file or line.
func TestLongPromptLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.txt")
	os.WriteFile(p, []byte("short\n\n"+strings.Repeat("x", maxPromptLine+10)+"\nlast\n"), 0o644)
	_, err := ReadPrompts(p)
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), p) {
		t.Fatalf("long line: %v", err)
	}
	os.WriteFile(p, []byte("a\n"+strings.Repeat("y", 200<<10)+"\n"), 0o644)
	if ps, err := ReadPrompts(p); err != nil || len(ps) != 2 {
		t.Fatalf("a 200 KiB line: %d prompts, %v", len(ps), err)
	}
}
