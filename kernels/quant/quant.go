// Package quant describes the ggml tensor types that GGUF files carry: their
// block layouts, and how to turn blocks into float32 values and back.
//
// Layouts follow ggml (ggml-common.h): every quantised type stores a row as a
// sequence of fixed-size blocks, each holding BlockSize weights in TypeSize
// bytes. The dequantisation routines here are the reference loops that the
// fast kernels in kernels/cpu are tested against.
package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Type is a ggml tensor type id, exactly as stored in a GGUF tensor info.
type Type uint32

// The ggml type ids that Arborist knows by name. Ids not listed here are
// reported as unknown, with their number.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

// QK is the number of weights in one block of the simple (non-K) types.
const QK = 32

// QKK is the number of weights in one super-block of the K types.
const QKK = 256

type info struct {
	name      string
	blockSize int // weights per block
	typeSize  int // bytes per block
	supported bool
}

var infos = map[Type]info{
	F32:  {"F32", 1, 4, true},
	F16:  {"F16", 1, 2, true},
	BF16: {"BF16", 1, 2, true},
	Q4_0: {"Q4_0", QK, 2 + QK/2, true},
	Q4_1: {"Q4_1", QK, 4 + QK/2, true},
	Q5_0: {"Q5_0", QK, 2 + 4 + QK/2, true},
	Q5_1: {"Q5_1", QK, 4 + 4 + QK/2, true},
	Q8_0: {"Q8_0", QK, 2 + QK, true},
	Q8_1: {"Q8_1", QK, 4 + QK, false},
	Q2_K: {"Q2_K", QKK, QKK/16 + QKK/4 + 4, true},
	Q3_K: {"Q3_K", QKK, QKK/8 + QKK/4 + 12 + 2, true},
	Q4_K: {"Q4_K", QKK, 4 + 12 + QKK/2, true},
	Q5_K: {"Q5_K", QKK, 4 + 12 + QKK/8 + QKK/2, true},
	Q6_K: {"Q6_K", QKK, QKK/2 + QKK/4 + QKK/16 + 2, true},
	Q8_K: {"Q8_K", QKK, 4 + QKK + QKK/16*2, false},
	// the non-linear 4-bit types: indices into KValuesIQ4NL
	IQ4_NL: {"IQ4_NL", QK, 2 + QK/2, true},
	IQ4_XS: {"IQ4_XS", QKK, 2 + 2 + QKK/64 + QKK/2, true},
	// known layouts Arborist does not compute with (grid- or ternary-coded):
	// files holding them open, and their tensors are refused by name
	IQ2_XXS: {"IQ2_XXS", QKK, 2 + QKK/4, false},
	IQ2_XS:  {"IQ2_XS", QKK, 2 + QKK/4 + QKK/32, false},
	IQ2_S:   {"IQ2_S", QKK, 2 + QKK/4 + QKK/16, false},
	IQ3_XXS: {"IQ3_XXS", QKK, 2 + 3*QKK/8, false},
	IQ3_S:   {"IQ3_S", QKK, 2 + 13*QKK/32 + QKK/64, false},
	IQ1_S:   {"IQ1_S", QKK, 2 + QKK/8 + QKK/16, false},
	IQ1_M:   {"IQ1_M", QKK, QKK/8 + QKK/16 + QKK/32, false},
	TQ1_0:   {"TQ1_0", QKK, 2 + QKK/64 + (QKK-4*QKK/64)/5, false},
	TQ2_0:   {"TQ2_0", QKK, 2 + QKK/4, false},
	MXFP4:   {"MXFP4", QK, 1 + QK/2, false},
	I8:      {"I8", 1, 1, false},
	I16:     {"I16", 1, 2, false},
	I32:     {"I32", 1, 4, false},
	I64:     {"I64", 1, 8, false},
	F64:     {"F64", 1, 8, false},
}

// Known reports whether t is a ggml type id whose layout Arborist knows.
func (t Type) Known() bool { _, ok := infos[t]; return ok }

// Supported reports whether Arborist can compute with weights of type t.
func (t Type) Supported() bool { return infos[t].supported }

// String returns ggml's name for t, or "type(N)" for an unknown id.
func (t Type) String() string {
	if in, ok := infos[t]; ok {
		return in.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of weights in one block of t (1 for plain types).
func (t Type) BlockSize() int { return infos[t].blockSize }

// TypeSize is the number of bytes in one block of t.
func (t Type) TypeSize() int { return infos[t].typeSize }

// ParseType maps a ggml type name such as "Q8_0" to its id.
func ParseType(name string) (Type, error) {
	for t, in := range infos {
		if in.name == name {
			return t, nil
		}
	}
	return 0, fmt.Errorf("quant: unknown tensor type %q", name)
}

// SupportedTypes lists the types Arborist computes with, in id order.
func SupportedTypes() []Type {
	return []Type{F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, BF16}
}

// RowBytes returns the byte size of a row of n weights of type t, or an error
// when n is not a whole number of blocks.
func RowBytes(t Type, n int) (int, error) {
	in, ok := infos[t]
	if !ok {
		return 0, fmt.Errorf("quant: unknown tensor type %d", uint32(t))
	}
	if n%in.blockSize != 0 {
		return 0, fmt.Errorf("quant: row of %d weights is not a whole number of %s blocks of %d", n, in.name, in.blockSize)
	}
	return n / in.blockSize * in.typeSize, nil
}

// F16ToF32 converts an IEEE half-precision value to float32.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: normalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	default:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	}
}

// F32ToF16 converts a float32 to IEEE half precision, rounding to nearest even.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++
	}
	return sign | uint16(r)
}

// BF16ToF32 converts a bfloat16 value to float32.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 converts a float32 to bfloat16, rounding to nearest even.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

func f16(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

// Dequantize expands src, a whole number of blocks of type t, into dst, which
// must hold exactly the number of weights those blocks encode.
func Dequantize(t Type, src []byte, dst []float32) error {
	in, ok := infos[t]
	if !ok || !in.supported {
		return fmt.Errorf("quant: cannot dequantise %s", t)
	}
	if len(dst)%in.blockSize != 0 || len(src) != len(dst)/in.blockSize*in.typeSize {
		return fmt.Errorf("quant: %s: %d bytes do not hold %d weights", t, len(src), len(dst))
	}
	nb := len(dst) / in.blockSize
	bs, ts := in.blockSize, in.typeSize
	for i := 0; i < nb; i++ {
		DequantizeBlock(t, src[i*ts:(i+1)*ts], dst[i*bs:(i+1)*bs])
	}
	return nil
}

// DequantizeBlock expands one block of type t. It is the reference loop: the
// layouts are spelled out here once.
func DequantizeBlock(t Type, b []byte, y []float32) {
	switch t {
	case F32:
		y[0] = math.Float32frombits(binary.LittleEndian.Uint32(b))
	case F16:
		y[0] = f16(b)
	case BF16:
		y[0] = BF16ToF32(binary.LittleEndian.Uint16(b))
	case Q8_0: // d f16, qs[32] int8: y = d*q
		d := f16(b)
		for j := 0; j < QK; j++ {
			y[j] = d * float32(int8(b[2+j]))
		}
	case Q4_0: // d f16, qs[16]: low nibbles are weights 0..15, high 16..31; y = d*(q-8)
		d := f16(b)
		qs := b[2:]
		for j := 0; j < QK/2; j++ {
			y[j] = d * float32(int(qs[j]&0xf)-8)
			y[j+QK/2] = d * float32(int(qs[j]>>4)-8)
		}
	case Q4_1: // d f16, m f16, qs[16]: y = d*q + m
		d, m := f16(b), f16(b[2:])
		qs := b[4:]
		for j := 0; j < QK/2; j++ {
			y[j] = d*float32(qs[j]&0xf) + m
			y[j+QK/2] = d*float32(qs[j]>>4) + m
		}
	case Q5_0: // d f16, qh u32 (fifth bits), qs[16]: y = d*(q-16)
		d := f16(b)
		qh := binary.LittleEndian.Uint32(b[2:])
		qs := b[6:]
		for j := 0; j < QK/2; j++ {
			h0 := byte((qh>>uint(j))<<4) & 0x10
			h1 := byte(qh>>uint(j+12)) & 0x10
			y[j] = d * float32(int(qs[j]&0xf|h0)-16)
			y[j+QK/2] = d * float32(int(qs[j]>>4|h1)-16)
		}
	case Q5_1: // d f16, m f16, qh u32, qs[16]: y = d*q + m
		d, m := f16(b), f16(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		qs := b[8:]
		for j := 0; j < QK/2; j++ {
			h0 := byte((qh>>uint(j))<<4) & 0x10
			h1 := byte(qh>>uint(j+12)) & 0x10
			y[j] = d*float32(qs[j]&0xf|h0) + m
			y[j+QK/2] = d*float32(qs[j]>>4|h1) + m
		}
	case Q4_K: // d, dmin f16; scales[12] (8 six-bit scale/min pairs); qs[128]
		d, dmin := f16(b), f16(b[2:])
		scales := b[4:16]
		q := b[16:]
		is := 0
		for j := 0; j < QKK; j += 64 {
			sc, m := ScaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = ScaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := 0; l < 32; l++ {
				y[j+l] = d1*float32(q[l]&0xf) - m1
				y[j+32+l] = d2*float32(q[l]>>4) - m2
			}
			q = q[32:]
			is += 2
		}
	case Q5_K: // d, dmin f16; scales[12]; qh[32]; qs[128]
		d, dmin := f16(b), f16(b[2:])
		scales := b[4:16]
		qh := b[16:48]
		ql := b[48:]
		is := 0
		var u1, u2 byte = 1, 2
		for j := 0; j < QKK; j += 64 {
			sc, m := ScaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = ScaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := 0; l < 32; l++ {
				var h1, h2 float32
				if qh[l]&u1 != 0 {
					h1 = 16
				}
				if qh[l]&u2 != 0 {
					h2 = 16
				}
				y[j+l] = d1*(float32(ql[l]&0xf)+h1) - m1
				y[j+32+l] = d2*(float32(ql[l]>>4)+h2) - m2
			}
			ql = ql[32:]
			is += 2
			u1 <<= 2
			u2 <<= 2
		}
	case Q6_K: // ql[128] low nibbles, qh[64] two high bits, scales[16] int8, d f16
		ql := b[0:128]
		qh := b[128:192]
		sc := b[192:208]
		d := f16(b[208:])
		for n := 0; n < QKK; n += 128 {
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int(ql[l]&0xf|(qh[l]>>0&3)<<4) - 32
				q2 := int(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				y[n+l] = d * float32(int8(sc[is])) * float32(q1)
				y[n+l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				y[n+l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				y[n+l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
			ql = ql[64:]
			qh = qh[32:]
			sc = sc[8:]
		}
	case Q2_K: // scales[16] (low nibble scale, high nibble min of 16 weights); qs[64] two bits; d, dmin f16
		d, dmin := f16(b[80:]), f16(b[82:])
		for i := 0; i < QKK; i++ {
			q, sc := Q2KWeight(b, i)
			y[i] = d*float32(sc&0xf)*float32(q) - dmin*float32(sc>>4)
		}
	case Q3_K: // hmask[32] third bits; qs[64] low two bits; scales[12] (16 six-bit); d f16
		d := f16(b[108:])
		var sc [16]int8
		Q3KScales(b[96:108], &sc)
		for i := 0; i < QKK; i++ {
			y[i] = d * float32(sc[i/16]) * float32(Q3KWeight(b, i))
		}
	case IQ4_NL: // d f16, qs[16]: y = d*KValuesIQ4NL[index]
		d := f16(b)
		qs := b[2:]
		for j := 0; j < QK/2; j++ {
			y[j] = d * float32(KValuesIQ4NL[qs[j]&0xf])
			y[j+QK/2] = d * float32(KValuesIQ4NL[qs[j]>>4])
		}
	case IQ4_XS: // d f16; scales_h u16, scales_l[4] (eight six-bit scales, offset 32); qs[128]
		d := f16(b)
		for s := 0; s < QKK/QK; s++ {
			dl := d * float32(IQ4XSScale(b, s))
			qs := b[8+16*s:]
			for j := 0; j < QK/2; j++ {
				y[s*QK+j] = dl * float32(KValuesIQ4NL[qs[j]&0xf])
				y[s*QK+j+QK/2] = dl * float32(KValuesIQ4NL[qs[j]>>4])
			}
		}
	default:
		panic("quant: DequantizeBlock of unsupported type " + t.String())
	}
}

// KValuesIQ4NL is the 16-entry non-linear table of IQ4_NL and IQ4_XS
// (ggml's kvalues_iq4nl): a weight is its block scale times one entry.
var KValuesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// Q2KWeight returns weight i (0..255) of a Q2_K super-block b as its two-bit
// value q and the scale byte of its 16-weight group (scale in the low
// nibble, min in the high one). Weight i = 128n + 32j + l sits at bits 2j of
// qs[32n + l]; its group is i/16.
func Q2KWeight(b []byte, i int) (q, sc byte) {
	n, j, l := i/128, i%128/32, i%32
	return b[16+32*n+l] >> uint(2*j) & 3, b[i/16]
}

// Q3KWeight returns weight i (0..255) of a Q3_K super-block b as a signed
// value in -4..3: the two low bits as in Q2_K (qs at offset 32), minus 4
// unless bit i/32 of hmask[i%32] is set.
func Q3KWeight(b []byte, i int) int {
	n, j, l := i/128, i%128/32, i%32
	q := int(b[32+32*n+l] >> uint(2*j) & 3)
	if b[l]>>uint(i/32)&1 == 0 {
		q -= 4
	}
	return q
}

// Q3KScales unpacks the 16 six-bit scales of a Q3_K super-block (12 bytes)
// to signed values (stored value - 32): scale j has its low four bits in
// byte j%8 (low nibble for j < 8, high for j >= 8) and its top two bits at
// bits 2*(j/4) of byte 8 + j%4.
func Q3KScales(p []byte, sc *[16]int8) {
	for j := 0; j < 16; j++ {
		lo := p[j%8] & 0xf
		if j >= 8 {
			lo = p[j%8] >> 4
		}
		hi := p[8+j%4] >> uint(2*(j/4)) & 3
		sc[j] = int8(lo|hi<<4) - 32
	}
}

// IQ4XSScale returns the signed scale (stored six bits - 32) of 32-weight
// sub-block s (0..7) of an IQ4_XS super-block b: low four bits in nibble
// s%2 of scales_l[s/2], top two bits at bits 2s of scales_h.
func IQ4XSScale(b []byte, s int) int {
	h := binary.LittleEndian.Uint16(b[2:])
	ls := int(b[4+s/2]>>uint(4*(s%2))&0xf) | int(h>>uint(2*s)&3)<<4
	return ls - 32
}

// ScaleMinK4 unpacks the j-th six-bit (scale, min) pair of a Q4_K/Q5_K
// super-block's 12 packed scale bytes.
func ScaleMinK4(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}
