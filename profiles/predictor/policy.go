package predictor

import (
	"encoding/json"

	"arborist/engine/spec"
)

// Policy is the EGT depth policy a trained predictor drives: the first
// level is always drafted; once the step's first level is drafted the
// trunk reads its features (the drafter's root distribution, the target's
// state, the last token's embedding), and after each level k a head
// decides, from them and the frontier's best path probability, whether
// level k+1 pays off. One Policy serves one generation at a time (its
// smoothing carries from step to step).
type Policy struct {
	P *Predictor
	// Embed writes the target's embedding of a token (for predictors that
	// read the embedding group).
	Embed func(tok int, dst []float32) error `json:"-"`
	d     *decider
	emb   []float32
}

// Next implements spec.DepthPolicy.
func (pp *Policy) Next(s spec.DepthState) bool {
	if s.Depth == 0 {
		return true
	}
	if s.Depth >= pp.P.Depth {
		return false
	}
	if pp.d == nil {
		pp.d = pp.P.decider()
	}
	if s.Depth == 1 {
		var emb []float32
		if pp.Embed != nil && pp.reads(Embedding) {
			if len(pp.emb) != pp.P.Dim {
				pp.emb = make([]float32, pp.P.Dim)
			}
			if err := pp.Embed(s.Last, pp.emb); err == nil {
				emb = pp.emb
			}
		}
		pp.d.begin(s.Hidden, emb, s.Top1, s.Entropy)
	}
	return pp.d.deeper(s.Depth, s.Best)
}

func (pp *Policy) reads(group string) bool {
	for _, f := range pp.P.Features {
		if f == group {
			return true
		}
	}
	return false
}

// MarshalJSON describes the policy in a run's stored settings by what it
// reads, not its weights (the predictor is stored once, by id).
func (pp *Policy) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Policy   string   `json:"policy"`
		Features []string `json:"features"`
		Path     bool     `json:"path"`
		Depth    int      `json:"depth"`
		EMA      float64  `json:"ema"`
	}{"predictor", pp.P.Features, pp.P.Path, pp.P.Depth, pp.P.EMA})
}
