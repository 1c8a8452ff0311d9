package model

import (
	"fmt"

	"arborist/engine/gguf"
	"arborist/kernels"
)

// LoadWith opens a GGUF model on backend be, mapped or (o.NoMmap) read into
// memory. The weights are read with memory faults turned into errors
// (gguf.Guard), so a file truncated while it loads gives a clear error.
func LoadWith(path string, be kernels.Device, o gguf.Options) (*Model, error) {
	f, err := gguf.OpenWith(path, o)
	if err != nil {
		return nil, err
	}
	var m *Model
	err = gguf.Guard(path, func() error {
		var lerr error
		m, lerr = FromFile(f, be)
		return lerr
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// CheckFile reports gguf.ErrShrunk when the model's mapped file has become
// shorter since it was opened; decoding loops call it between passes so a
// truncated model ends the run with that error instead of SIGBUS.
func (m *Model) CheckFile() error { return m.File.Check() }

// CheckLogits refuses logits holding NaN: weights or metadata with NaN
// (or infinities that meet) make every logit NaN, and sampling NaN
// silently gives a meaningless token or an empty output; the decoding
// loops stop with this error instead. It costs one pass over the rows.
func (m *Model) CheckLogits(logits []float32) error {
	for i, v := range logits {
		if v != v {
			return &gguf.Error{Path: m.Path, Err: fmt.Errorf("model: the forward pass produced NaN (logit %d of row %d); the weights or the metadata (epsilon, rope) hold NaN or overflow", i%max(m.Vocab, 1), i/max(m.Vocab, 1))}
		}
	}
	return nil
}
