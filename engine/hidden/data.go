package hidden

import (
	"context"
	"encoding/binary"
	"fmt"

	"arborist/kernels/quant"
)

// DataCache keeps generated training data between runs, so a retrain on
// the same target, prompts and data settings skips generation. LoadData
// returns nil when nothing is stored under key.
type DataCache interface {
	LoadData(ctx context.Context, key string) ([]byte, error)
	SaveData(ctx context.Context, key string, data []byte) error
}

// encodeData writes sequences compactly: per sequence its length, its
// tokens (uint16 or uint32 by vocabulary) and its hidden states as float16
// (the labels lose nothing that matters: half precision keeps three
// significant digits, far below the drafter's error).
func encodeData(seqs []*seq, dim int) []byte {
	n := 8
	for _, s := range seqs {
		n += 4 + 4*len(s.tokens) + 2*len(s.h)
	}
	b := make([]byte, 0, n)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(seqs)))
	b = binary.LittleEndian.AppendUint32(b, uint32(dim))
	for _, s := range seqs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s.tokens)))
		for _, t := range s.tokens {
			b = binary.LittleEndian.AppendUint32(b, uint32(t))
		}
		for _, v := range s.h[:len(s.tokens)*dim] {
			b = binary.LittleEndian.AppendUint16(b, quant.F32ToF16(v))
		}
	}
	return b
}

// decodeData reads encodeData's form, checking every size against the
// bytes present before allocating.
func decodeData(b []byte, dim, vocab int) ([]*seq, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("%d bytes is too short", len(b))
	}
	count, d := int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:]))
	if d != dim {
		return nil, fmt.Errorf("hidden states of width %d, the target's are %d", d, dim)
	}
	b = b[8:]
	if count > len(b)/4 {
		return nil, fmt.Errorf("%d sequences in %d bytes", count, len(b))
	}
	out := make([]*seq, 0, count)
	for i := 0; i < count; i++ {
		if len(b) < 4 {
			return nil, fmt.Errorf("sequence %d is cut off", i)
		}
		T := int(binary.LittleEndian.Uint32(b))
		b = b[4:]
		if T < 0 || T > len(b)/(4+2*dim) {
			return nil, fmt.Errorf("sequence %d: %d tokens do not fit in the %d bytes left", i, T, len(b))
		}
		s := &seq{tokens: make([]int, T), h: make([]float32, T*dim)}
		for j := range s.tokens {
			t := int(binary.LittleEndian.Uint32(b[4*j:]))
			if t >= vocab {
				return nil, fmt.Errorf("sequence %d: token %d outside the vocabulary of %d", i, t, vocab)
			}
			s.tokens[j] = t
		}
		b = b[4*T:]
		for j := range s.h {
			s.h[j] = quant.F16ToF32(binary.LittleEndian.Uint16(b[2*j:]))
		}
		b = b[2*T*dim:]
		out = append(out, s)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d bytes after the last sequence", len(b))
	}
	return out, nil
}
