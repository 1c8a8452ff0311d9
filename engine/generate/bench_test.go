package generate

import (
	"context"
	"testing"

	"arborist/engine/model"
	"arborist/engine/model/modeltest/testfiles"
	"arborist/engine/sample"
	"arborist/kernels/cpu"
)

// BenchmarkDecode measures plain decoding of the bench target: 128 tokens
// after a short prompt, one token per pass. Reports tokens/s.
func BenchmarkDecode(b *testing.B) {
	path := testfiles.Shared(b, "models/bench/target-60m-q8_0.gguf")
	be := cpu.New(cpu.DefaultThreads())
	defer be.Close()
	m, err := model.Load(path, be)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	prompt := m.Tok.Encode("Once upon a time", true, false)
	b.ResetTimer()
	var tps float64
	for i := 0; i < b.N; i++ {
		_, st, err := Run(context.Background(), m, prompt, Options{MaxTokens: 128, Sample: sample.Params{}})
		if err != nil {
			b.Fatal(err)
		}
		tps += st.DecodeTPS()
	}
	b.ReportMetric(tps/float64(b.N), "tokens/s")
}
