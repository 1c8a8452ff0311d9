package cpu

import (
	"encoding/binary"
	"unsafe"

	"arborist/kernels/quant"
)

// f32Row views little-endian float32 weight bytes as a []float32 without
// copying (every platform Arborist builds for is little-endian).
func f32Row(b []byte, n int) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
}

// dotF32 returns sum_i a[i]*b[i] over len(a), with four accumulators.
func dotF32(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func f16le(b []byte) float32 { return quant.F16ToF32(binary.LittleEndian.Uint16(b)) }

// A q8Dot multiplies one weight row (whole blocks) by one row of activations
// quantised to 8 bits: yd are the block scales, yq the values, ys the block
// sums.
type q8Dot func(w []byte, yd []float32, yq []int8, ys []int32) float32

var q8Dots = map[quant.Type]q8Dot{
	quant.Q8_0: dotQ8_0,
	quant.Q4_0: dotQ4_0,
	quant.Q4_1: dotQ4_1,
	quant.Q5_0: dotQ5_0,
	quant.Q5_1: dotQ5_1,
}

// dotQ8_0: sum_b d_w*d_y * sum_j qw[j]*qy[j].
func dotQ8_0(w []byte, yd []float32, yq []int8, _ []int32) float32 {
	var sum float32
	for b := range yd {
		blk := w[b*34 : b*34+34]
		qw := blk[2:34]
		qy := yq[b*32 : b*32+32]
		var s int32
		for j := 0; j < 32; j += 4 {
			s += int32(int8(qw[j]))*int32(qy[j]) + int32(int8(qw[j+1]))*int32(qy[j+1]) +
				int32(int8(qw[j+2]))*int32(qy[j+2]) + int32(int8(qw[j+3]))*int32(qy[j+3])
		}
		sum += f16le(blk) * yd[b] * float32(s)
	}
	return sum
}

// dotQ4_0: sum_b d_w*d_y * sum_j (q_w[j]-8)*qy[j].
func dotQ4_0(w []byte, yd []float32, yq []int8, ys []int32) float32 {
	var sum float32
	for b := range yd {
		blk := w[b*18 : b*18+18]
		qs := blk[2:18]
		qy := yq[b*32 : b*32+32]
		var s int32
		for j := 0; j < 16; j++ {
			s += int32(qs[j]&0xf)*int32(qy[j]) + int32(qs[j]>>4)*int32(qy[j+16])
		}
		sum += f16le(blk) * yd[b] * float32(s-8*ys[b])
	}
	return sum
}

// dotQ4_1: sum_b d_w*d_y * sum_j q_w[j]*qy[j] + m_w*d_y*sum_j qy[j].
func dotQ4_1(w []byte, yd []float32, yq []int8, ys []int32) float32 {
	var sum float32
	for b := range yd {
		blk := w[b*20 : b*20+20]
		qs := blk[4:20]
		qy := yq[b*32 : b*32+32]
		var s int32
		for j := 0; j < 16; j++ {
			s += int32(qs[j]&0xf)*int32(qy[j]) + int32(qs[j]>>4)*int32(qy[j+16])
		}
		sum += f16le(blk)*yd[b]*float32(s) + f16le(blk[2:])*yd[b]*float32(ys[b])
	}
	return sum
}

// dotQ5_0: like Q4_0 with a fifth bit from qh and an offset of 16.
func dotQ5_0(w []byte, yd []float32, yq []int8, ys []int32) float32 {
	var sum float32
	for b := range yd {
		blk := w[b*22 : b*22+22]
		qh := binary.LittleEndian.Uint32(blk[2:])
		qs := blk[6:22]
		qy := yq[b*32 : b*32+32]
		var s int32
		for j := 0; j < 16; j++ {
			lo := int32(qs[j]&0xf) | int32(qh>>uint(j)&1)<<4
			hi := int32(qs[j]>>4) | int32(qh>>uint(j+16)&1)<<4
			s += lo*int32(qy[j]) + hi*int32(qy[j+16])
		}
		sum += f16le(blk) * yd[b] * float32(s-16*ys[b])
	}
	return sum
}

// dotQ5_1: like Q4_1 with a fifth bit from qh.
func dotQ5_1(w []byte, yd []float32, yq []int8, ys []int32) float32 {
	var sum float32
	for b := range yd {
		blk := w[b*24 : b*24+24]
		qh := binary.LittleEndian.Uint32(blk[4:])
		qs := blk[8:24]
		qy := yq[b*32 : b*32+32]
		var s int32
		for j := 0; j < 16; j++ {
			lo := int32(qs[j]&0xf) | int32(qh>>uint(j)&1)<<4
			hi := int32(qs[j]>>4) | int32(qh>>uint(j+16)&1)<<4
			s += lo*int32(qy[j]) + hi*int32(qy[j+16])
		}
		sum += f16le(blk)*yd[b]*float32(s) + f16le(blk[2:])*yd[b]*float32(ys[b])
	}
	return sum
}
