package predictor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPredictorGradients checks the hand-written backward pass against
// central finite differences for every parameter block.
func TestPredictorGradients(t *testing.T) {
	p := New(5, 6, 3, 1)
	rng := rand.New(rand.NewPCG(2, 3))
	var data []Sample
	for i := 0; i < 6; i++ {
		h := make([]float32, 5)
		for j := range h {
			h[j] = float32(rng.NormFloat64())
		}
		data = append(data, Sample{Hidden: h, Accepted: i % 4})
	}
	heads := 3
	g := p.zero()
	for _, s := range data {
		p.grads(s, heads, g)
	}
	analytic := g.params()
	for bi, block := range p.params() {
		isWeight := bi < p.Hidden || (bi > p.Hidden && bi < len(analytic)-1)
		for j := range block {
			orig := block[j]
			const eps = 1e-6
			block[j] = orig + eps
			up := p.Loss(data, heads)
			block[j] = orig - eps
			down := p.Loss(data, heads)
			block[j] = orig
			num := (up - down) / (2 * eps)
			an := analytic[bi][j] / float64(len(data))
			if isWeight {
				an += 2 * l2 * orig
			}
			if math.Abs(num-an) > 1e-5*math.Max(1, math.Abs(num)) {
				t.Fatalf("block %d [%d]: analytic %.8f, numeric %.8f", bi, j, an, num)
			}
		}
	}
}

// TestPredictorLearns: on synthetic data where the hidden state's first
// feature decides how deep drafts are accepted, the trained predictor beats
// the majority-class rate on held-out samples.
func TestPredictorLearns(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	var data []Sample
	for i := 0; i < 800; i++ {
		h := make([]float32, 8)
		for j := range h {
			h[j] = float32(rng.NormFloat64())
		}
		acc := 0
		switch {
		case h[0] > 0.7:
			acc = 4
		case h[0] > -0.3:
			acc = 2
		}
		data = append(data, Sample{Hidden: h, Accepted: acc})
	}
	p := New(8, 16, 4, 9)
	if err := p.Train(data, TrainOptions{Epochs: 30, LR: 3e-3}); err != nil {
		t.Fatal(err)
	}
	for d := 0; d < 4; d++ {
		majority := math.Max(p.Stats.BaseRate[d], 1-p.Stats.BaseRate[d])
		if p.Stats.Accuracy[d] < majority+0.05 && majority < 0.95 {
			t.Errorf("depth %d: held-out accuracy %.2f does not beat the majority rate %.2f", d+1, p.Stats.Accuracy[d], majority)
		}
	}
	b, _ := p.Marshal()
	q, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := p.Predict(data[0].Hidden), q.Predict(data[0].Hidden); math.Abs(a[0]-b[0]) > 1e-12 {
		t.Error("stored predictor predicts differently")
	}
	if _, err := Unmarshal([]byte(`{"In":3,"Hidden":2,"Depth":1}`)); err == nil {
		t.Error("inconsistent predictor accepted")
	}
}
