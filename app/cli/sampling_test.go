package cli

import (
	"flag"
	"io"
	"strings"
	"testing"

	"arborist/profiles"
)

// TestSampleFlagsAreTheFields: the sampling flags are one per sampling
// field, with the field's default, read and checked by the field (the top
// of temperature's range is taken, just above it refused), and every
// generating verb offers them with their bounds in its help.
func TestSampleFlagsAreTheFields(t *testing.T) {
	fields := profiles.SamplingFields()
	fs := flag.NewFlagSet("sampling", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	read := sampleFlags(fs)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n != len(fields) {
		t.Fatalf("%d sampling flags for %d fields", n, len(fields))
	}
	for _, f := range fields {
		if fl := fs.Lookup(f.Flag); fl == nil || fl.DefValue != f.Default {
			t.Fatalf("field %s: flag %+v", f.Name, fl)
		}
	}
	if p, err := read(); err != nil || p != profiles.DefaultSampling() {
		t.Fatalf("no flags given: %+v, %v", p, err)
	}
	if err := fs.Parse([]string{"--temp", "2", "--top-k", "40", "--top-p", "0.9", "--min-p", "0.05", "--seed", "18446744073709551615"}); err != nil {
		t.Fatal(err)
	}
	want := profiles.SampleParams{Temp: 2, TopK: 40, TopP: 0.9, MinP: 0.05, Seed: 1<<64 - 1}
	if p, err := read(); err != nil || p != want {
		t.Fatalf("read %+v, %v; want %+v", p, err, want)
	}

	for _, verb := range []string{"generate", "run", "calibrate"} {
		_, _, usage := run(t, verb, "--help")
		for _, f := range fields {
			if !strings.Contains(usage, "-"+f.Flag+" ") || !strings.Contains(usage, f.Bounds()) {
				t.Errorf("%s --help does not offer --%s with its bounds (%s)", verb, f.Flag, f.Bounds())
			}
		}
	}
	for _, v := range []string{"2.01", "-0.1", "NaN"} {
		code, _, stderr := run(t, "generate", "--model", "m.gguf", "--temp", v)
		if code != 2 || !strings.Contains(stderr, "a number in [0, 2]") {
			t.Errorf("--temp %s: exit %d, %q", v, code, stderr)
		}
	}
	if code, _, stderr := run(t, "generate", "--model", "m.gguf", "--top-k", "1.5"); code != 2 || !strings.Contains(stderr, "top-k") {
		t.Errorf("--top-k 1.5: exit %d, %q", code, stderr)
	}
}
