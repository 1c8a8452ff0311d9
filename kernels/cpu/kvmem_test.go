package cpu

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// TestKVMapped: a cache above hugeMin lives in its own mapping (on Linux)
// and holds, attends over, compacts and copies the same bits as a small
// cache of Go slices; Free unmaps it and leaves nothing to reach it by.
func TestKVMapped(t *testing.T) {
	const layers, kvHeads, heads, hd, past, n = 2, 4, 8, 64, 96, 4
	kvd, qd := kvHeads*hd, heads*hd
	shape := kernels.AttnShape{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.125}
	be := New(2)
	defer be.Close()
	for _, typ := range []quant.Type{quant.F32, quant.F16} {
		bigSlots := int(hugeMin/(2*layers*kvd*typ.TypeSize())) + 1
		bi, err := be.NewKV(layers, bigSlots, kvd, typ)
		if err != nil {
			t.Fatal(err)
		}
		si, err := be.NewKV(layers, past+n, kvd, typ)
		if err != nil {
			t.Fatal(err)
		}
		big, small := bi.(*KV), si.(*KV)
		if mapped := big.mem != nil; mapped != (runtime.GOOS == "linux") || small.mem != nil {
			t.Fatalf("%v: large cache mapped %v, small %v (on %s)", typ, mapped, small.mem != nil, runtime.GOOS)
		}
		rng := rand.New(rand.NewPCG(3, uint64(typ)))
		for l := 0; l < layers; l++ {
			k, v := gaussian(rng, (past+n)*kvd), gaussian(rng, (past+n)*kvd)
			be.StoreKV(big, l, 0, Wrap(k), Wrap(v), past+n)
			be.StoreKV(small, l, 0, Wrap(k), Wrap(v), past+n)
		}
		q := Wrap(gaussian(rng, n*qd))
		same := func(what string, a, b kernels.KV, past int) {
			t.Helper()
			for l := 0; l < layers; l++ {
				oa, ob := make([]float32, n*qd), make([]float32, n*qd)
				be.Attention(Wrap(oa), q, a, l, past, n, nil, shape)
				be.Attention(Wrap(ob), q, b, l, past, n, nil, shape)
				for i := range oa {
					if math.Float32bits(oa[i]) != math.Float32bits(ob[i]) || oa[i] != oa[i] {
						t.Fatalf("%v %s, layer %d: out[%d] = %v mapped, %v in Go slices", typ, what, l, i, oa[i], ob[i])
					}
				}
			}
		}
		same("attention", big, small, past)
		keep := []int{0, 5, 6, 40, 41, 42, 90, 95, 96, 97, 98, 99} // every other slot's rows move, some in place
		if err := be.Compact(big, keep, past+n); err != nil {
			t.Fatal(err)
		}
		if err := be.Compact(small, keep, past+n); err != nil {
			t.Fatal(err)
		}
		same("after compaction", big, small, len(keep)-n)
		ci, err := be.NewKV(layers, past+n, kvd, typ)
		if err != nil {
			t.Fatal(err)
		}
		if err := be.CopyKV(ci, big, len(keep)); err != nil {
			t.Fatal(err)
		}
		same("copied out", ci, small, len(keep)-n)
		// negative control: the comparison sees a changed key
		if typ == quant.F32 {
			big.k[1][3] += 1
			oa, ob := make([]float32, n*qd), make([]float32, n*qd)
			be.Attention(Wrap(oa), q, big, 1, len(keep)-n, n, nil, shape)
			be.Attention(Wrap(ob), q, small, 1, len(keep)-n, n, nil, shape)
			differ := false
			for i := range oa {
				differ = differ || oa[i] != ob[i]
			}
			if !differ {
				t.Fatal("a changed key left every output the same")
			}
		}
		big.Free()
		big.Free() // twice is harmless
		if big.mem != nil || big.k != nil || big.k16 != nil {
			t.Fatalf("%v: a freed cache still holds its memory", typ)
		}
	}
}
