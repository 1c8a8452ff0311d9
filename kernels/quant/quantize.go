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
	case Q2_K:
		quantizeQ2K(x, b)
	case Q3_K:
		quantizeQ3K(x, b)
	case IQ4_NL:
		putF16(b, quantizeIQ4(x, b[2:], 0))
	case IQ4_XS:
		quantizeIQ4XS(x, b)
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

// quantizeQ2K fits each 16-weight group with a scale and a min (four bits
// each, relative to the super-block's d and dmin) and two-bit weights.
func quantizeQ2K(x []float32, b []byte) {
	var scales, mins [16]float32
	maxSc, maxMin := float32(0), float32(0)
	for g := 0; g < 16; g++ {
		lo, hi := minMax(x[g*16 : g*16+16])
		lo = min(lo, 0)
		scales[g], mins[g] = (hi-lo)/3, -lo
		maxSc, maxMin = max(maxSc, scales[g]), max(maxMin, mins[g])
	}
	putF16(b[80:], maxSc/15)
	putF16(b[82:], maxMin/15)
	d, dmin := f16(b[80:]), f16(b[82:])
	for g := 0; g < 16; g++ {
		ls := clampRound(scales[g]*inv(d), 0, 15)
		lm := clampRound(mins[g]*inv(dmin), 0, 15)
		b[g] = byte(ls) | byte(lm)<<4
	}
	qs := b[16:80]
	clear(qs)
	for i := 0; i < QKK; i++ {
		sc := b[i/16]
		ds, ms := d*float32(sc&0xf), dmin*float32(sc>>4)
		q := clampRound((x[i]+ms)*inv(ds), 0, 3)
		qs[32*(i/128)+i%32] |= byte(q) << uint(2*(i%128/32))
	}
}

// quantizeQ3K gives each 16-weight group a signed six-bit scale relative
// to the super-block's d (the largest scale maps to -32, as ggml does) and
// three-bit weights in -4..3, stored as two low bits and an hmask bit.
func quantizeQ3K(x []float32, b []byte) {
	var scales [16]float32
	maxScale, amax := float32(0), float32(0)
	for g := 0; g < 16; g++ {
		_, m := absMax(x[g*16 : g*16+16])
		scales[g] = m / -4
		if a := float32(math.Abs(float64(scales[g]))); a > amax {
			amax, maxScale = a, scales[g]
		}
	}
	clear(b)
	var ls [16]int
	if maxScale != 0 {
		iscale := -32 / maxScale
		for g := 0; g < 16; g++ {
			ls[g] = clampRound(iscale*scales[g], -32, 31)
		}
		putF16(b[108:], 1/iscale)
	}
	for g := 0; g < 16; g++ {
		l := byte(ls[g] + 32)
		b[96+g%8] |= (l & 0xf) << uint(4*(g/8))
		b[96+8+g%4] |= (l >> 4) << uint(2*(g/4))
	}
	d := f16(b[108:])
	for i := 0; i < QKK; i++ {
		q := clampRound(x[i]*inv(d*float32(ls[i/16])), -4, 3) + 4
		l := i % 32
		if q > 3 {
			b[l] |= 1 << uint(i/32)
			q -= 4
		}
		b[32+32*(i/128)+l] |= byte(q) << uint(2*(i%128/32))
	}
}

// nearestIQ4 returns the index of the KValuesIQ4NL entry nearest v.
func nearestIQ4(v float32) int {
	best, bestErr := 0, float32(math.Inf(1))
	for i, k := range KValuesIQ4NL {
		if e := float32(math.Abs(float64(v - float32(k)))); e < bestErr {
			best, bestErr = i, e
		}
	}
	return best
}

// quantizeIQ4 encodes 32 weights as indices into KValuesIQ4NL (nibbles
// packed as in IQ4_NL: weight j low, j+16 high) with scale d, and returns
// d. With fixed = 0 the scale is fitted: the largest magnitude maps to the
// table's -127 end, then one least-squares step refits d to the chosen
// indices and the indices are chosen again; otherwise fixed is used.
func quantizeIQ4(x []float32, qs []byte, fixed float32) float32 {
	d := fixed
	if fixed == 0 {
		_, m := absMax(x)
		d = m / -127
		if d == 0 {
			clear(qs[:QK/2])
			return 0
		}
		var sxv, svv float64
		for _, v := range x {
			k := float64(KValuesIQ4NL[nearestIQ4(v/d)])
			sxv += float64(v) * k
			svv += k * k
		}
		if svv > 0 && sxv != 0 {
			d = float32(sxv / svv)
		}
		d = F16ToF32(F32ToF16(d))
	}
	id := inv(d)
	for j := 0; j < QK/2; j++ {
		qs[j] = byte(nearestIQ4(x[j]*id)) | byte(nearestIQ4(x[j+QK/2]*id))<<4
	}
	return d
}

// quantizeIQ4XS fits each 32-weight sub-block's IQ4 scale, stores the
// scales as six-bit values relative to the super-block's d, and encodes
// the weights against the stored scales.
func quantizeIQ4XS(x []float32, b []byte) {
	var scales [8]float32
	var tmp [QK / 2]byte
	maxScale, amax := float32(0), float32(0)
	for s := 0; s < 8; s++ {
		scales[s] = quantizeIQ4(x[s*QK:(s+1)*QK], tmp[:], 0)
		if a := float32(math.Abs(float64(scales[s]))); a > amax {
			amax, maxScale = a, scales[s]
		}
	}
	clear(b)
	d := maxScale / -32
	putF16(b, d)
	d = f16(b)
	var h uint16
	for s := 0; s < 8; s++ {
		l := clampRound(scales[s]*inv(d), -32, 31)
		ls := byte(l + 32)
		b[4+s/2] |= (ls & 0xf) << uint(4*(s%2))
		h |= uint16(ls>>4) << uint(2*s)
		dl := d * float32(l)
		if dl == 0 {
			continue // every index 0 would be -127*0: leave the nibbles, any value gives 0
		}
		quantizeIQ4(x[s*QK:(s+1)*QK], b[8+16*s:], dl)
	}
	binary.LittleEndian.PutUint16(b[2:], h)
}
