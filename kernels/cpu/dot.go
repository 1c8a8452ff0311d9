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

// DotF32 returns sum_i a[i]*b[i] over len(a), with four accumulators: the
// pure-Go float32 kernel, also used by code that multiplies small float32
// vectors outside a backend (the hidden drafter's trainer).
func DotF32(a, b []float32) float32 {
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
	quant.Q8_0:   dotQ8_0,
	quant.Q4_0:   dotQ4_0,
	quant.Q4_1:   dotQ4_1,
	quant.Q5_0:   dotQ5_0,
	quant.Q5_1:   dotQ5_1,
	quant.Q4_K:   dotQ4K,
	quant.Q5_K:   dotQ5K,
	quant.Q6_K:   dotQ6K,
	quant.Q2_K:   dotQ2K,
	quant.Q3_K:   dotQ3K,
	quant.IQ4_NL: dotIQ4NL,
	quant.IQ4_XS: dotIQ4XS,
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

// The K-quant products below run on the same 32-value 8-bit activation
// blocks as the others: a 256-value super-block's 32-value sub-blocks line
// up with activation blocks, so each sub-block's integer sum is exact and
// its scales are applied once per block (Q6_K's 16-value sub-blocks come
// in pairs inside one activation block).

// dotQ4K: sum over sub-blocks j of d*sc_j*dy_j*sum(q*qy) - dmin*m_j*dy_j*sum(qy).
func dotQ4K(w []byte, yd []float32, yq []int8, ys []int32) float32 {
	return dotK45(w, yd, yq, ys, false)
}

// dotQ5K: Q4_K with a fifth bit, bit j of qh[l], for sub-block j.
func dotQ5K(w []byte, yd []float32, yq []int8, ys []int32) float32 {
	return dotK45(w, yd, yq, ys, true)
}

// dotK45 is dotQ4K, or dotQ5K when five is set (144- or 176-byte
// super-blocks; Q5_K keeps qh[32] before the nibbles).
func dotK45(w []byte, yd []float32, yq []int8, ys []int32, five bool) float32 {
	bb, qlOff := 144, 16
	if five {
		bb, qlOff = 176, 48
	}
	var sum float32
	for s := 0; s < len(yd)/8; s++ {
		blk := w[s*bb : (s+1)*bb]
		d, dmin := f16le(blk), f16le(blk[2:])
		for j := 0; j < 8; j++ {
			b := s*8 + j
			ql, shift := blk[qlOff+32*(j/2):], uint(4*(j%2))
			qy := yq[b*32 : b*32+32]
			var isum int32
			for l := 0; l < 32; l++ {
				q := int32(ql[l] >> shift & 0xf)
				if five {
					q |= int32(blk[16+l]>>uint(j)&1) << 4
				}
				isum += q * int32(qy[l])
			}
			sc, m := quant.ScaleMinK4(j, blk[4:16])
			sum += d*yd[b]*float32(int32(sc)*isum) - dmin*yd[b]*float32(int32(m)*ys[b])
		}
	}
	return sum
}

// dotQ6K: sum over activation blocks of d*dy*sum over its two 16-value
// halves of sc_h*sum((q6-32)*qy).
func dotQ6K(w []byte, yd []float32, yq []int8, _ []int32) float32 {
	var sum float32
	for s := 0; s < len(yd)/8; s++ {
		blk := w[s*210 : (s+1)*210]
		d := f16le(blk[208:])
		for half := 0; half < 2; half++ {
			ql, qh, sc := blk[64*half:], blk[128+32*half:], blk[192+8*half:]
			for g := 0; g < 4; g++ {
				b := s*8 + half*4 + g
				qy := yq[b*32 : b*32+32]
				lo := ql[32*(g%2):] // groups 0, 2 use ql[l], groups 1, 3 ql[l+32]
				var isum int32
				for l := 0; l < 32; l++ {
					q := int32(lo[l]>>uint(4*(g/2))&0xf|(qh[l]>>uint(2*g)&3)<<4) - 32
					isum += int32(int8(sc[2*g+l/16])) * q * int32(qy[l])
				}
				sum += d * yd[b] * float32(isum)
			}
		}
	}
	return sum
}

// dotQ2K: per activation block, d*dy*sum over its two 16-value groups of
// sc_g*sum(q*qy), minus dmin*dy*sum of m_g*sum(qy) (both exact integers).
func dotQ2K(w []byte, yd []float32, yq []int8, _ []int32) float32 {
	var sum float32
	for s := 0; s < len(yd)/8; s++ {
		blk := w[s*84 : (s+1)*84]
		d, dmin := f16le(blk[80:]), f16le(blk[82:])
		for j := 0; j < 8; j++ {
			b := s*8 + j
			qs, shift := blk[16+32*(j/4):], uint(2*(j%4))
			qy := yq[b*32 : b*32+32]
			var isum, msum int32
			for l := 0; l < 32; l++ {
				sc := blk[2*j+l/16]
				isum += int32(sc&0xf) * int32(qs[l]>>shift&3) * int32(qy[l])
				msum += int32(sc>>4) * int32(qy[l])
			}
			sum += d*yd[b]*float32(isum) - dmin*yd[b]*float32(msum)
		}
	}
	return sum
}

// dotQ3K: per activation block, d*dy*sum over its two 16-value groups of
// sc_g*sum(q*qy), q in -4..3.
func dotQ3K(w []byte, yd []float32, yq []int8, _ []int32) float32 {
	var sum float32
	var sc [16]int8
	for s := 0; s < len(yd)/8; s++ {
		blk := w[s*110 : (s+1)*110]
		d := f16le(blk[108:])
		quant.Q3KScales(blk[96:108], &sc)
		for j := 0; j < 8; j++ {
			b := s*8 + j
			qs, shift := blk[32+32*(j/4):], uint(2*(j%4))
			qy := yq[b*32 : b*32+32]
			var isum int32
			for l := 0; l < 32; l++ {
				q := int32(qs[l] >> shift & 3)
				if blk[l]>>uint(j)&1 == 0 {
					q -= 4
				}
				isum += int32(sc[2*j+l/16]) * q * int32(qy[l])
			}
			sum += d * yd[b] * float32(isum)
		}
	}
	return sum
}

// dotIQ4NL: sum_b d_w*d_y * sum_j KValuesIQ4NL[idx_j]*qy[j].
func dotIQ4NL(w []byte, yd []float32, yq []int8, _ []int32) float32 {
	var sum float32
	for b := range yd {
		blk := w[b*18 : b*18+18]
		qs := blk[2:18]
		qy := yq[b*32 : b*32+32]
		var s int32
		for j := 0; j < 16; j++ {
			s += int32(quant.KValuesIQ4NL[qs[j]&0xf])*int32(qy[j]) + int32(quant.KValuesIQ4NL[qs[j]>>4])*int32(qy[j+16])
		}
		sum += f16le(blk) * yd[b] * float32(s)
	}
	return sum
}

// dotIQ4XS: IQ4_NL's product per 32-value sub-block, times the sub-block's
// six-bit scale, with one fp16 d per super-block.
func dotIQ4XS(w []byte, yd []float32, yq []int8, _ []int32) float32 {
	var sum float32
	for s := 0; s < len(yd)/8; s++ {
		blk := w[s*136 : (s+1)*136]
		d := f16le(blk)
		for j := 0; j < 8; j++ {
			b := s*8 + j
			qs := blk[8+16*j:]
			qy := yq[b*32 : b*32+32]
			var isum int32
			for l := 0; l < 16; l++ {
				isum += int32(quant.KValuesIQ4NL[qs[l]&0xf])*int32(qy[l]) + int32(quant.KValuesIQ4NL[qs[l]>>4])*int32(qy[l+16])
			}
			sum += d * yd[b] * float32(int32(quant.IQ4XSScale(blk, j))*isum)
		}
	}
	return sum
}
