package synth

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"testing"

	"arborist/engine/gguf"
	"arborist/engine/model/modeltest/testfiles"
	"arborist/kernels/quant"
)

// TestLlama3RopeFactorsMatchConverter: the rope_freqs synth writes for
// Llama 3.1 (factor 8) and 3.2 (factor 32) equal the tensors llama.cpp's
// converter wrote into the conformance kit's files.
func TestLlama3RopeFactorsMatchConverter(t *testing.T) {
	dir := testfiles.Shared(t, "conformance/models")
	for _, c := range []struct {
		file   string
		factor float32
	}{{"llama31-rope8.gguf", 8}, {"llama32-rope32-tied.gguf", 32}} {
		f, err := gguf.Open(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		ti, data, err := f.TensorData("rope_freqs.weight")
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, ti.Elements())
		if err := quant.Dequantize(ti.Type, data, want); err != nil {
			t.Fatal(err)
		}
		base, _ := f.Float("llama.rope.freq_base")
		hd, _ := f.Uint("llama.rope.dimension_count")
		f.Close()
		got := Llama3RopeFactors(float32(base), int(hd), c.factor, 1, 4, 8192)
		if len(got) != len(want) {
			t.Fatalf("%s: %d factors, the file has %d", c.file, len(got), len(want))
		}
		for i := range got {
			if math.Abs(float64(got[i]-want[i])) > 1e-5*float64(want[i]) {
				t.Errorf("%s: factor %d = %g, the converter wrote %g", c.file, i, got[i], want[i])
			}
		}
	}
}

// TestNamedShapes: every named shape is valid, and the new families'
// shapes carry what their files need.
func TestNamedShapes(t *testing.T) {
	for _, name := range ShapeNames() {
		s, err := ParseShape(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if s.Params() == 0 {
			t.Errorf("%s: no parameters", name)
		}
	}
	if s, _ := ParseShape("llama-3.2-1b"); s.Llama3Rope != 32 {
		t.Errorf("llama-3.2-1b writes no rope_freqs (factor %g)", s.Llama3Rope)
	}
	if _, err := ParseShape("custom:dim=64,layers=1,heads=2,ffn=64,vocab=300,arch=phi3"); err == nil {
		t.Error("a phi3 shape without a sliding window was accepted")
	}
	if _, err := ParseShape("custom:dim=64,layers=1,heads=2,ffn=64,vocab=300,arch=gpt2"); err == nil {
		t.Error("an unknown arch was accepted")
	}
}

// Writing ahead on several goroutines gives the file one goroutine writes,
// byte for byte, and a cancelled write stops with the context's error.
func TestPrefetchWritesTheSameFile(t *testing.T) {
	s, err := ParseShape("custom:dim=64,layers=3,heads=4,kv=2,ffn=128,vocab=300")
	if err != nil {
		t.Fatal(err)
	}
	write := func(procs int) []byte {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		var b bytes.Buffer
		if err := Write(context.Background(), &b, s, Options{Type: quant.Q8_0, Seed: 7}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	one, many := write(1), write(4)
	if !bytes.Equal(one, many) {
		t.Fatalf("%d bytes on one goroutine, %d on four, not the same", len(one), len(many))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	if err := Write(ctx, io.Discard, s, Options{Type: quant.Q8_0, Seed: 7}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write: %v, want context.Canceled", err)
	}
}
