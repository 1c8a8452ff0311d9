package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Quantize encodes src (a whole number of blocks of weights) as type t into
// dst, which must be exactly RowBytes(t, len(src)) long. The K types use a
// plain min/max fit rather than ggml's iterative search: good enough for
// synthetic models and round-trip tests, not for shipping quantised weights.
func Quantize(t Type, src []float32, dst []byte) error {
	in, ok := infos[t]
	if !ok || !in.supported {
		return fmt.Errorf("quant: cannot quantise to %s", t)
	}
	n, err := RowBytes(t, len(src))
	if err != nil {
		return err
	}
	if len(dst) != n {
		return fmt.Errorf("quant: %s: %d bytes cannot hold %d weights", t, len(dst), len(src))
	}
	bs, ts := in.blockSize, in.typeSize
	for i := 0; i < len(src)/bs; i++ {
		quantizeBlock(t, src[i*bs:(i+1)*bs], dst[i*ts:(i+1)*ts])
	}
	return nil
}

func putF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, F32ToF16(f)) }

func absMax(x []float32) (amax, signed float32) {
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, signed = a, v
		}
	}
	return
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = x[0], x[0]
	for _, v := range x[1:] {
		lo = min(lo, v)
		hi = max(hi, v)
	}
	return
}

func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

func clampRound(v float32, lo, hi int) int {
	r := int(math.RoundToEven(float64(v)))
	return max(lo, min(hi, r))
}

func quantizeBlock(t Type, x []float32, b []byte) {
	switch t {
	case F32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(x[0]))
	case F16:
		putF16(b, x[0])
	case BF16:
		binary.LittleEndian.PutUint16(b, F32ToBF16(x[0]))
	case Q8_0:
		amax, _ := absMax(x)
		d := amax / 127
		id := inv(d)
		putF16(b, d)
		for j := 0; j < QK; j++ {
			b[2+j] = byte(int8(clampRound(x[j]*id, -127, 127)))
		}
	case Q4_0, Q5_0:
		_, m := absMax(x)
		levels := float32(-8)
		off, top := 8, 15
		if t == Q5_0 {
			levels, off, top = -16, 16, 31
		}
		d := m / levels
		id := inv(d)
		putF16(b, d)
		var qh uint32
		qs := b[2:]
		if t == Q5_0 {
			qs = b[6:]
		}
		for j := 0; j < QK/2; j++ {
			q0 := clampRound(x[j]*id+float32(off), 0, top)
			q1 := clampRound(x[j+QK/2]*id+float32(off), 0, top)
			qs[j] = byte(q0&0xf) | byte(q1&0xf)<<4
			qh |= uint32(q0>>4&1)<<uint(j) | uint32(q1>>4&1)<<uint(j+QK/2)
		}
		if t == Q5_0 {
			binary.LittleEndian.PutUint32(b[2:], qh)
		}
	case Q4_1, Q5_1:
		lo, hi := minMax(x)
		top := 15
		qs := b[4:]
		if t == Q5_1 {
			top, qs = 31, b[8:]
		}
		d := (hi - lo) / float32(top)
		id := inv(d)
		putF16(b, d)
		putF16(b[2:], lo)
		var qh uint32
		for j := 0; j < QK/2; j++ {
			q0 := clampRound((x[j]-lo)*id, 0, top)
			q1 := clampRound((x[j+QK/2]-lo)*id, 0, top)
			qs[j] = byte(q0&0xf) | byte(q1&0xf)<<4
			qh |= uint32(q0>>4&1)<<uint(j) | uint32(q1>>4&1)<<uint(j+QK/2)
		}
		if t == Q5_1 {
			binary.LittleEndian.PutUint32(b[4:], qh)
		}
	case Q4_K, Q5_K:
		quantizeQ45K(t, x, b)
	case Q6_K:
		quantizeQ6K(x, b)
	default:
		panic("quant: quantizeBlock of unsupported type " + t.String())
	}
}

// quantizeQ45K fits each 32-weight sub-block with scale and min, then packs
// the eight six-bit scales and mins relative to the super-block's d and dmin.
func quantizeQ45K(t Type, x []float32, b []byte) {
	top := float32(15)
	if t == Q5_K {
		top = 31
	}
	var scales, mins [8]float32
	for s := 0; s < 8; s++ {
		lo, hi := minMax(x[s*32 : s*32+32])
		lo = min(lo, 0)
		scales[s] = (hi - lo) / top
		mins[s] = -lo
	}
	maxSc, maxMin := float32(0), float32(0)
	for s := 0; s < 8; s++ {
		maxSc = max(maxSc, scales[s])
		maxMin = max(maxMin, mins[s])
	}
	d, dmin := maxSc/63, maxMin/63
	putF16(b, d)
	putF16(b[2:], dmin)
	d, dmin = F16ToF32(F32ToF16(d)), F16ToF32(F32ToF16(dmin))
	var ls, lm [8]byte
	for s := 0; s < 8; s++ {
		ls[s] = byte(clampRound(scales[s]*inv(d), 0, 63))
		lm[s] = byte(clampRound(mins[s]*inv(dmin), 0, 63))
	}
	sc := b[4:16]
	for j := 0; j < 4; j++ {
		sc[j] = ls[j] | (ls[j+4]>>4)<<6
		sc[j+4] = lm[j] | (lm[j+4]>>4)<<6
		sc[j+8] = ls[j+4]&0xf | (lm[j+4]&0xf)<<4
	}
	var q [QKK]int
	for s := 0; s < 8; s++ {
		ds := d * float32(ls[s])
		ms := dmin * float32(lm[s])
		for l := 0; l < 32; l++ {
			q[s*32+l] = clampRound((x[s*32+l]+ms)*inv(ds), 0, int(top))
		}
	}
	if t == Q4_K {
		qs := b[16:]
		for j := 0; j < QKK; j += 64 {
			for l := 0; l < 32; l++ {
				qs[j/2+l] = byte(q[j+l]) | byte(q[j+32+l])<<4
			}
		}
		return
	}
	qh := b[16:48]
	ql := b[48:]
	for i := range qh {
		qh[i] = 0
	}
	var u1, u2 byte = 1, 2
	for j := 0; j < QKK; j += 64 {
		for l := 0; l < 32; l++ {
			q1, q2 := q[j+l], q[j+32+l]
			ql[j/2+l] = byte(q1&0xf) | byte(q2&0xf)<<4
			if q1 > 15 {
				qh[l] |= u1
			}
			if q2 > 15 {
				qh[l] |= u2
			}
		}
		u1 <<= 2
		u2 <<= 2
	}
}

// quantizeQ6K gives each 16-weight sub-block a signed eight-bit scale
// relative to the super-block's d, and six-bit weights offset by 32.
func quantizeQ6K(x []float32, b []byte) {
	var scales [16]float32
	maxAbs := float32(0)
	for s := 0; s < 16; s++ {
		_, m := absMax(x[s*16 : s*16+16])
		scales[s] = m / -32
		if a := float32(math.Abs(float64(scales[s]))); a > maxAbs {
			maxAbs = a
		}
	}
	d := maxAbs / 127
	putF16(b[208:], d)
	d = F16ToF32(F32ToF16(d))
	sc := b[192:208]
	var q [QKK]int
	for s := 0; s < 16; s++ {
		is := clampRound(scales[s]*inv(d), -128, 127)
		sc[s] = byte(int8(is))
		ds := d * float32(is)
		for l := 0; l < 16; l++ {
			q[s*16+l] = clampRound(x[s*16+l]*inv(ds)+32, 0, 63)
		}
	}
	ql := b[0:128]
	qh := b[128:192]
	for n := 0; n < QKK; n += 128 {
		for l := 0; l < 32; l++ {
			q1, q2, q3, q4 := q[n+l], q[n+l+32], q[n+l+64], q[n+l+96]
			ql[n/2+l] = byte(q1&0xf) | byte(q3&0xf)<<4
			ql[n/2+l+32] = byte(q2&0xf) | byte(q4&0xf)<<4
			qh[n/4+l] = byte(q1>>4) | byte(q2>>4)<<2 | byte(q3>>4)<<4 | byte(q4>>4)<<6
		}
	}
}
