package cli

import (
	"context"
	"encoding/json"
	"errors"

	"arborist/profiles"
)

// The verbs here (and generate's --ids and --print-ids) exist to compare
// Arborist with another engine on the same weights: token ids in, logits or
// token ids out, no tokenizer in between.

// parseIDs reads a comma-separated list of token ids; the model checks
// their range.
func parseIDs(s string) ([]int, error) {
	ids, err := profiles.ParseInts(s)
	if err != nil {
		return nil, usagef("--ids: %v", err)
	}
	if len(ids) == 0 {
		return nil, usagef("--ids is empty")
	}
	return ids, nil
}

// runLogits prints, for every position of the teacher-forced ids, the top
// logits as one JSON line {"pos": i, "top": [[id, logit], ...]}.
func runLogits(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "logits", "--model M --ids 1,2,3 [--top 8] [--threads N]")
	path := fs.String("model", "", "GGUF model `file`")
	idList := fs.String("ids", "", "comma-separated token ids, BOS included if wanted (no tokenizer is involved)")
	top := fs.Int("top", 8, "logits per position, highest first (lower id first on a tie)")
	noMmap := fs.Bool("no-mmap", false, "read the model into memory instead of mapping it")
	var backend string
	var threads int
	backendFlags(fs, &backend, &threads)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" || *idList == "" {
		return fail(fs, usagef("--model and --ids are required"))
	}
	if *top <= 0 {
		return fail(fs, usagef("--top %d must be positive", *top))
	}
	if err := checkBackend(backend, threads); err != nil {
		return fail(fs, err)
	}
	ids, err := parseIDs(*idList)
	if err != nil {
		return fail(fs, err)
	}
	enc := json.NewEncoder(env.Stdout)
	err = profiles.Logits(ctx, profiles.LogitsOptions{Model: *path, Backend: backend, Threads: threads, NoMmap: *noMmap, IDs: ids, Top: *top},
		func(pos int, top [][2]float64) error {
			return enc.Encode(struct {
				Pos int          `json:"pos"`
				Top [][2]float64 `json:"top"`
			}{pos, top})
		})
	if errors.Is(err, profiles.ErrTokenID) {
		return fail(fs, usagef("--ids: %v", err))
	}
	return err
}
