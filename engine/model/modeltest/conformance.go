package modeltest

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"arborist/engine/model"
	"arborist/engine/sample"
)

type refLine struct {
	Model          string         `json:"model"`
	IDs            []int          `json:"ids"`
	Top            [][][2]float64 `json:"top"`
	Greedy         []int          `json:"greedy"`
	GreedyTop      [][][2]float64 `json:"greedy_top"`
	ExactTop       [][][2]float64 `json:"exact_top"`
	ExactGreedy    []int          `json:"exact_greedy"`
	ExactGreedyTop [][][2]float64 `json:"exact_greedy_top"`
	RefVsExact     *struct {
		RMS float64 `json:"rms"`
		Max float64 `json:"max"`
	} `json:"ref_vs_exact"`
}

func readRefs(t *testing.T, conformanceDir string) []refLine {
	t.Helper()
	f, err := os.Open(filepath.Join(conformanceDir, "ref.jsonl"))
	if err != nil {
		t.Fatalf("conformance kit %s: %v", conformanceDir, err)
	}
	defer f.Close()
	var refs []refLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r refLine
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("ref.jsonl: %v", err)
		}
		refs = append(refs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(refs) == 0 {
		t.Fatal("ref.jsonl is empty")
	}
	return refs
}

// topDiff is the largest |engine - reference| over the reference's top
// pairs of one row, and the sum of squares for an RMS.
func topDiff(row []float32, top [][2]float64) (mx, sq float64) {
	for _, p := range top {
		d := math.Abs(float64(row[int(p[0])]) - p[1])
		mx = math.Max(mx, d)
		sq += d * d
	}
	return mx, sq
}

// Conformance runs every model of the ../shared/conformance kit (tiny
// random-weight GGUFs written as llama.cpp's converter writes them, with
// llama.cpp's logits on fixed id sequences; the kit's README.md gives the
// format and the tolerances applied) on every reference sequence:
// teacher-forced logits in one batch, then the greedy continuation one
// token per pass.
func Conformance(t *testing.T, dev Device) {
	conformanceDir := Shared(t, "conformance")
	refs := readRefs(t, conformanceDir)
	be := open(t, dev)
	ctx := context.Background()
	models := map[string]*model.Model{}
	defer func() {
		for _, m := range models {
			m.Close()
		}
	}()
	type figure struct {
		max, sq float64
		n       int
	}
	figs := map[string]*figure{}
	var order []string
	for _, r := range refs {
		m := models[r.Model]
		if m == nil {
			var err error
			m, err = model.Load(filepath.Join(conformanceDir, "models", r.Model), be)
			if err != nil {
				t.Errorf("%s: %v", r.Model, err)
				continue
			}
			models[r.Model] = m
			figs[r.Model] = &figure{}
			order = append(order, r.Model)
		}
		name := strings.TrimSuffix(r.Model, ".gguf")
		quantised := strings.HasPrefix(name, "llama-q-")
		top, greedy, greedyTop := r.Top, r.Greedy, r.GreedyTop
		if r.ExactTop != nil {
			top, greedy, greedyTop = r.ExactTop, r.ExactGreedy, r.ExactGreedyTop
		}
		if len(top) != len(r.IDs) || len(greedyTop) != len(greedy) {
			t.Fatalf("%s: ref line has %d ids, %d top rows, %d greedy, %d greedy_top rows", r.Model, len(r.IDs), len(top), len(greedy), len(greedyTop))
		}
		cache := m.NewCache(len(r.IDs) + len(greedy) + 1)
		var res model.Result
		if err := m.Forward(ctx, cache, model.Batch{Tokens: r.IDs}, &res); err != nil {
			t.Fatalf("%s: %v", r.Model, err)
		}
		fig := figs[r.Model]
		seqMax, seqSq, seqN := 0.0, 0.0, 0
		for i := range r.IDs {
			mx, sq := topDiff(res.Logits[i*m.Vocab:(i+1)*m.Vocab], top[i])
			seqMax = math.Max(seqMax, mx)
			seqSq += sq
			seqN += len(top[i])
		}
		fig.max = math.Max(fig.max, seqMax)
		fig.sq += seqSq
		fig.n += seqN
		switch {
		case !quantised && seqMax > 1e-4:
			t.Errorf("%s, %d ids: teacher-forced logits differ from the reference by up to %.3g (tolerance 1e-4)", name, len(r.IDs), seqMax)
		case quantised && r.RefVsExact == nil:
			t.Errorf("%s: no ref_vs_exact in the reference", name)
		case quantised:
			// as close to exact as llama.cpp itself, with a x1.5 margin for chance
			rms := math.Sqrt(seqSq / float64(seqN))
			if rms > 1.5*r.RefVsExact.RMS || seqMax > 1.5*r.RefVsExact.Max {
				t.Errorf("%s, %d ids: RMS %.3g, max %.3g from exact; llama.cpp's own: RMS %.3g, max %.3g", name, len(r.IDs), rms, seqMax, r.RefVsExact.RMS, r.RefVsExact.Max)
			}
		}
		// greedy continuation, one token per pass
		last := append([]float32(nil), res.Logits[(len(r.IDs)-1)*m.Vocab:]...)
		for j := range greedy {
			row := last
			if !quantised {
				if mx, _ := topDiff(row, greedyTop[j]); mx > 1e-4 {
					t.Errorf("%s, %d ids: greedy step %d logits differ by %.3g (tolerance 1e-4)", name, len(r.IDs), j, mx)
					break
				}
			}
			got := sample.Argmax(row) // the lower id on an exact tie, as the reference
			if got != greedy[j] {
				margin := greedyTop[j][0][1] - greedyTop[j][1][1]
				if !quantised && margin >= 1e-4 {
					t.Errorf("%s, %d ids: greedy step %d chose %d, the reference %d (margin %.3g)", name, len(r.IDs), j, got, greedy[j], margin)
				}
				break // the continuations part here (allowed for quantised files and near-ties)
			}
			if j == len(greedy)-1 {
				break
			}
			if err := m.Forward(ctx, cache, model.Batch{Tokens: []int{got}}, &res); err != nil {
				t.Fatalf("%s: %v", r.Model, err)
			}
			last = append(last[:0], res.Logits...)
		}
	}
	for _, name := range order {
		f := figs[name]
		if f.n > 0 {
			t.Logf("%-26s max |diff| %.3g  RMS %.3g over %d top pairs", name, f.max, math.Sqrt(f.sq/float64(f.n)), f.n)
		}
	}
}
