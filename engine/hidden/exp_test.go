package hidden

import (
	"context"
	"os"
	"strconv"
	"testing"
)

func TestExp(t *testing.T) {
	m := loadTarget(t, os.Getenv("EXP_MODEL"))
	ps := storyPrompts(t, m)
	set := DefaultSettings()
	atoi := func(k string, d int) int {
		v, err := strconv.Atoi(os.Getenv(k))
		if err != nil {
			return d
		}
		return v
	}
	set.D, set.Tokens, set.Epochs, set.Depth, set.Batch, set.Samples = atoi("D", 64), atoi("TOK", 128), atoi("EP", 10), 3, atoi("B", 4), atoi("S", 8)
	if lr, err := strconv.ParseFloat(os.Getenv("LR"), 64); err == nil {
		set.LR = lr
	}
	if w, err := strconv.ParseFloat(os.Getenv("MSEW"), 64); err == nil {
		set.MSEWeight = w
		set.KLWeight = 1 - w
	}
	tr := &Trainer{Target: m, Prompts: ps, Settings: set}
	tr.Progress = func(p Progress) {
		if p.Record != nil {
			t.Logf("%+v", *p.Record)
		}
	}
	d, _ := New(m, set.D, atoi("INIT", m.Layers/2), 1)
	if err := tr.Train(context.Background(), d, nil); err != nil {
		t.Fatal(err)
	}
	a, b := tr.Tokens()
	t.Logf("tokens %d %d", a, b)
}
