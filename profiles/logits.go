package profiles

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"arborist/engine/model"
)

// Logits and the id mode of Generate exist to compare Arborist with another
// engine on the same weights: token ids in, logits or token ids out, no
// tokenizer in between.

// LogitsOptions describe a teacher-forced pass over token ids.
type LogitsOptions struct {
	Model   string
	Backend string
	Threads int
	NoMmap  bool
	IDs     []int // BOS included if wanted
	Top     int   // logits per position, highest first (lower id first on a tie)
}

// Logits runs the ids through the model as one batch and calls emit with
// each position's top logits as (id, logit) pairs.
func Logits(ctx context.Context, opt LogitsOptions, emit func(pos int, top [][2]float64) error) error {
	if opt.Top <= 0 {
		return fmt.Errorf("top %d must be positive", opt.Top)
	}
	m, be, err := openModel(opt.Backend, opt.Threads, opt.Model, opt.NoMmap, "")
	if err != nil {
		return err
	}
	defer closeModel(m, be)
	if err := checkIDs(opt.IDs, m.Vocab); err != nil {
		return err
	}
	if len(opt.IDs) > m.CtxLen {
		return fmt.Errorf("%d ids exceed the model's context of %d", len(opt.IDs), m.CtxLen)
	}
	var res model.Result
	if err := m.Forward(ctx, m.NewCache(len(opt.IDs)), model.Batch{Tokens: opt.IDs}, &res); err != nil {
		return err
	}
	k := min(opt.Top, m.Vocab)
	order := make([]int, m.Vocab)
	for i := range opt.IDs {
		row := res.Logits[i*m.Vocab : (i+1)*m.Vocab]
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool { return row[order[a]] > row[order[b]] })
		top := make([][2]float64, k)
		for j, id := range order[:k] {
			top[j] = [2]float64{float64(id), float64(row[id])}
		}
		if err := emit(i, top); err != nil {
			return err
		}
	}
	return nil
}

// ErrTokenID marks token ids the model cannot take (a caller's mistake, so
// the CLI reports it as usage).
var ErrTokenID = errors.New("bad token ids")

// checkIDs refuses an empty list or an id outside the vocabulary.
func checkIDs(ids []int, vocab int) error {
	if len(ids) == 0 {
		return fmt.Errorf("%w: none given", ErrTokenID)
	}
	for _, id := range ids {
		if id < 0 || id >= vocab {
			return fmt.Errorf("%w: token id %d is outside the vocabulary [0, %d)", ErrTokenID, id, vocab)
		}
	}
	return nil
}
