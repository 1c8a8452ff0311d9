package hidden

import (
	"bytes"
	"math"
	"runtime"
	"testing"
)

// tinyDrafter is a drafter with a toy shape that needs no target.
func tinyDrafter() *Drafter {
	s := Shape{Dim: 8, Heads: 2, KVHeads: 1, HeadDim: 4, FFN: 12, Vocab: 10, D: 3, RopeDim: 4, RopeBase: 10000, RopeScale: 1, Eps: 1e-5}
	d := &Drafter{Shape: s, P: make([]float32, s.Params()), Hot: []int{3, 1}, Target: "t.gguf", Fingerprint: "abc", Settings: DefaultSettings(),
		Losses: []Epoch{{Epoch: 1, Depth: 1, Train: 1, HeldOut: 2}}}
	for i := range d.P {
		d.P[i] = float32(i%7) * 0.25
	}
	return d
}

// FuzzDecode: no input makes the drafter parser panic, and whatever it
// accepts encodes and decodes to the same drafter.
func FuzzDecode(f *testing.F) {
	d := tinyDrafter()
	good, err := d.Bytes(nil)
	if err != nil {
		f.Fatal(err)
	}
	st := &State{Epoch: 1, Step: 2, M: make([]float32, len(d.P)), V: make([]float32, len(d.P))}
	ckpt, err := d.Bytes(st)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(ckpt)
	f.Add(good[:len(good)/2])
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, st, err := Decode("fuzz", data)
		if err != nil {
			return
		}
		// an accepted drafter's shape holds only numbers a layer can use
		// (a NaN epsilon used to be accepted and drafted nothing)
		for _, v := range []float32{d.Eps, d.RopeBase, d.RopeScale} {
			if !(v > 0) || math.IsInf(float64(v), 0) {
				t.Fatalf("accepted a shape with %v: %+v", v, d.Shape)
			}
		}
		again, err := d.Bytes(st)
		if err != nil {
			t.Fatalf("re-encoding an accepted drafter: %v", err)
		}
		d2, _, err := Decode("again", again)
		if err != nil {
			t.Fatalf("decoding a re-encoded drafter: %v", err)
		}
		if d2.Shape != d.Shape || len(d2.P) != len(d.P) || len(d2.Hot) != len(d.Hot) {
			t.Fatalf("round trip changed the drafter: %+v vs %+v", d2.Shape, d.Shape)
		}
		for i := range d.P {
			if d.P[i] != d2.P[i] && !(d.P[i] != d.P[i]) { // NaN stays NaN
				t.Fatalf("parameter %d changed", i)
			}
		}
	})
}

func TestTinyDrafterRoundTrip(t *testing.T) {
	d := tinyDrafter()
	b, err := d.Bytes(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, st, err := Decode("tiny", b)
	if err != nil || st != nil || got.Shape != d.Shape || !bytes.Equal(f32Bytes(got.P), f32Bytes(d.P)) {
		t.Fatalf("round trip: %v %+v", err, got)
	}
}

// TestHugeShapeRefused: a header claiming an enormous layer is refused by
// checking the tensors, not by trying to allocate the parameters.
func TestHugeShapeRefused(t *testing.T) {
	b, err := tinyDrafter().Bytes(nil)
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("hidden.feed_forward_length")
	at := bytes.Index(b, key)
	if at < 0 {
		t.Fatal("key not found")
	}
	v := at + len(key) + 4                       // after the value type
	b[v], b[v+1], b[v+2], b[v+3] = 0, 0, 0x80, 0 // 1<<23
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, derr := Decode("huge", b)
	runtime.ReadMemStats(&after)
	if derr == nil {
		t.Fatal("a drafter with an impossible shape was accepted")
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("refusing allocated %d MiB", grew>>20)
	}
	t.Log(derr)
}

// TestMemoryNeed: the estimate is modest for the bench target's shape and
// large for a 1B model with a 128K vocabulary, where training must refuse
// to start on a small machine rather than be killed.
func TestMemoryNeed(t *testing.T) {
	bench := Shape{Dim: 512, Heads: 64, KVHeads: 32, HeadDim: 8, FFN: 1376, Vocab: 512, D: 256}
	big := Shape{Dim: 2048, Heads: 32, KVHeads: 8, HeadDim: 64, FFN: 8192, Vocab: 128256, D: 256}
	small, large := MemoryNeed(bench, 100000, 190, 3, 2), MemoryNeed(big, 3072, 200, 3, 2)
	if small > 1<<30 || large < 4<<30 {
		t.Errorf("estimates %d MiB (bench) and %d MiB (1B, 128K vocabulary)", small>>20, large>>20)
	}
}
