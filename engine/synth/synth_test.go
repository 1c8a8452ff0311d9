package synth

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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

// TestMediumMix: Q4_K_M and Q5_K_M files get llama.cpp's types matrix by
// matrix (the output matrix, or embeddings tied to it, Q6_K; attn_v and
// ffn_down Q6_K in the first and last eighth of the layers and every
// third between; Phi-3's fused attn_qkv one K-quant up; rows the K-quant
// blocks do not divide on llama.cpp's fallbacks), the header names the
// mix, and Size is the tensor data Write writes.
func TestMediumMix(t *testing.T) {
	more := map[int]bool{0: true, 1: true, 4: true, 7: true, 10: true, 13: true, 14: true, 15: true} // of 16 layers
	for _, c := range []struct {
		shape string
		base  quant.Type
		want  func(name string, layer int) quant.Type
	}{
		{"custom:dim=256,layers=16,heads=4,kv=2,ffn=512,vocab=300", quant.Q4_K, func(name string, l int) quant.Type {
			switch {
			case name == "output.weight", (name == "attn_v.weight" || name == "ffn_down.weight") && more[l]:
				return quant.Q6_K
			}
			return quant.Q4_K
		}},
		{"custom:dim=256,layers=16,heads=4,kv=2,ffn=512,vocab=300,tied=1", quant.Q5_K, func(name string, l int) quant.Type {
			switch {
			case name == "token_embd.weight", (name == "attn_v.weight" || name == "ffn_down.weight") && more[l]:
				return quant.Q6_K
			}
			return quant.Q5_K
		}},
		// rows of 288 (stories15m's width): K-quant blocks of 256 do not divide them
		{"custom:dim=288,layers=16,heads=6,kv=6,ffn=768,vocab=300", quant.Q4_K, func(name string, l int) quant.Type {
			switch {
			case name == "output.weight", (name == "attn_v.weight") && more[l]:
				return quant.Q8_0
			case name == "ffn_down.weight" && more[l]:
				return quant.Q6_K // rows of 768
			case name == "ffn_down.weight":
				return quant.Q4_K
			}
			return quant.Q5_0
		}},
		// rows of 80: not even Q8_0's blocks of 32 divide them, so F16
		// (the output matrix included); ffn_down's rows of 96 take Q5_0
		// and, one type up, Q8_0
		{"custom:dim=80,layers=16,heads=2,kv=2,ffn=96,vocab=300", quant.Q4_K, func(name string, l int) quant.Type {
			switch {
			case name == "ffn_down.weight" && more[l]:
				return quant.Q8_0
			case name == "ffn_down.weight":
				return quant.Q5_0
			}
			return quant.F16
		}},
		{"custom:dim=256,layers=16,heads=4,kv=4,ffn=512,vocab=300,arch=phi3,window=64", quant.Q4_K, func(name string, l int) quant.Type {
			switch {
			case name == "output.weight", name == "ffn_down.weight" && more[l]:
				return quant.Q6_K
			case name == "attn_qkv.weight":
				return quant.Q5_K
			}
			return quant.Q4_K
		}},
	} {
		s, err := ParseShape(c.shape)
		if err != nil {
			t.Fatal(err)
		}
		opt := Options{Type: c.base, Medium: true, Seed: 3}
		var b bytes.Buffer
		if err := Write(context.Background(), &b, s, opt); err != nil {
			t.Fatalf("%s: %v", c.shape, err)
		}
		f, err := gguf.Parse("mix.gguf", b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if ft, _ := f.Uint("general.file_type"); ft != uint64(FileType(c.base)) {
			t.Errorf("%s: file type %d, want %d", c.shape, ft, FileType(c.base))
		}
		if got, want := Size(s, opt), f.WeightBytes(); got != want {
			t.Errorf("%s: Size %d, the file's tensors %d", c.shape, got, want)
		}
		for _, ti := range f.Tensors {
			if len(ti.Dims) < 2 {
				continue // norms, biases, rope factors
			}
			name, l := ti.Name, -1
			if rest, ok := strings.CutPrefix(name, "blk."); ok {
				n, tail, _ := strings.Cut(rest, ".")
				l, _ = strconv.Atoi(n)
				name = tail
			}
			if want := c.want(name, l); ti.Type != want {
				t.Errorf("%s: %s is %s, want %s", c.shape, ti.Name, ti.Type, want)
			}
		}
	}
	if _, _, err := ParseType("Q8_0_M"); err == nil {
		t.Error("Q8_0_M read as a type")
	}
	if typ, medium, err := ParseType("q4_k_m"); err != nil || typ != quant.Q4_K || !medium {
		t.Errorf("q4_k_m: %s %v %v", typ, medium, err)
	}
	for _, o := range []Options{{Type: quant.Q5_K, Medium: true}, {Type: quant.Q6_K}} {
		if typ, medium, err := ParseType(o.TypeName()); err != nil || typ != o.Type || medium != o.Medium {
			t.Errorf("%s read back as %s, medium %v (%v)", o.TypeName(), typ, medium, err)
		}
	}
	s, _ := ParseShape("custom:dim=256,layers=2,heads=4,kv=2,ffn=512,vocab=300")
	if err := Write(context.Background(), io.Discard, s, Options{Type: quant.Q8_0, Medium: true}); err == nil || !strings.Contains(err.Error(), "medium mix") {
		t.Errorf("a medium mix of Q8_0: %v", err)
	}
}
