package generate

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"arborist/engine/gguf"
	"arborist/engine/model"
	"arborist/engine/model/modeltest/testfiles"
	"arborist/engine/synth"
	"arborist/kernels/cpu"
	"arborist/kernels/quant"
)

// TestNaNWeightsFail: decoding a model with NaN weights stops with an
// error naming the NaN and the file, instead of an empty output and
// success.
func TestNaNWeightsFail(t *testing.T) {
	dir := t.TempDir()
	sh, err := synth.ParseShape("custom:dim=64,layers=1,heads=4,kv=2,ffn=96,vocab=300")
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.gguf")
	if err := synth.WriteFile(context.Background(), good, sh, synth.Options{Type: quant.F32, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	src, err := gguf.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var ts []gguf.WriteTensor
	for i := range src.Tensors {
		ti := &src.Tensors[i]
		data := append([]byte(nil), src.Data(ti)...)
		if ti.Name == "output_norm.weight" {
			for j := 0; j+4 <= len(data); j += 4 {
				binary.LittleEndian.PutUint32(data[j:], math.Float32bits(float32(math.NaN())))
			}
		}
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: data})
	}
	bad := filepath.Join(dir, "nan.gguf")
	if err := gguf.WriteFile(bad, src.KV, ts); err != nil {
		t.Fatal(err)
	}
	be := cpu.New(1)
	defer be.Close()
	m, err := model.Load(bad, be)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, _, err = Run(context.Background(), m, []int{1, 5, 6}, Options{MaxTokens: 4})
	if err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Fatalf("NaN weights: err = %v", err)
	}
	var ge *gguf.Error
	if !errors.As(err, &ge) || ge.Path != bad {
		t.Errorf("error does not name the file: %v", err)
	}
}

// TestTruncatedModelFile: a mapped model file truncated during a run ends
// the run with gguf.ErrShrunk (the file is checked before every pass), not
// SIGBUS with a Go stack trace.
func TestTruncatedModelFile(t *testing.T) {
	src := testfiles.Stories260K(t)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	be := cpu.New(1)
	defer be.Close()
	m, err := model.Load(p, be)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	prompt := m.Tok.Encode("Once upon a time", true, false)
	n := 0
	_, _, err = Run(context.Background(), m, prompt, Options{MaxTokens: 32, OnToken: func(int) {
		if n++; n == 4 {
			os.Truncate(p, 4096) // mid-run, between passes
		}
	}})
	if !errors.Is(err, gguf.ErrShrunk) {
		t.Fatalf("truncated mid-run: %v", err)
	}
	if _, _, err := Run(context.Background(), m, prompt, Options{MaxTokens: 4}); !errors.Is(err, gguf.ErrShrunk) {
		t.Fatalf("truncated before the run: %v", err)
	}
}
