package synth

import (
	"bytes"
	"context"
	"io"
	"runtime"

	"arborist/engine/gguf"
)

// prefetchBytes bounds the tensors computed ahead of the writer.
const prefetchBytes = 1 << 30

// prefetch makes ts's Fills compute their bytes on up to GOMAXPROCS
// goroutines ahead of the writer, which still takes them in order: drawing
// and quantising random weights is CPU work that one core did alone (an
// 8B shape took minutes), while the file is written in sequence. Each
// tensor's bytes depend only on its own seed, so the file is the same
// byte for byte. At most GOMAXPROCS tensors and about prefetchBytes (one
// tensor, if it is larger) are held at once. stop ends the prefetching
// once the writer is done, or has failed.
func prefetch(ctx context.Context, ts []gguf.WriteTensor) (stop func()) {
	workers := runtime.GOMAXPROCS(0)
	if workers < 2 || len(ts) < 2 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	type filled struct {
		b   []byte
		err error
	}
	res := make([]chan filled, len(ts))
	released := make(chan int64, len(ts))
	fills := make([]func(io.Writer) error, len(ts))
	for i := range ts {
		res[i] = make(chan filled, 1)
		fills[i] = ts[i].Fill
		size := int64(ts[i].Bytes())
		ts[i].Fill = func(w io.Writer) error {
			select {
			case r := <-res[i]:
				released <- size
				if r.err != nil {
					return r.err
				}
				_, err := w.Write(r.b)
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	go func() {
		var held int64
		n := 0
		for i := range ts {
			size := int64(ts[i].Bytes())
			for n >= workers || (n > 0 && held+size > prefetchBytes) {
				select {
				case s := <-released:
					held -= s
					n--
				case <-ctx.Done():
					return
				}
			}
			held += size
			n++
			go func() {
				var b bytes.Buffer
				b.Grow(int(size))
				err := fills[i](&b)
				res[i] <- filled{b.Bytes(), err}
			}()
		}
	}()
	return cancel
}
