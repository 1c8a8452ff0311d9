package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func h(f float32) []byte {
	b := make([]byte, 2)
	binary.LittleEndian.PutUint16(b, F32ToF16(f))
	return b
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// block builds a block of size bytes from the given prefix, zero-filled.
func block(size int, parts ...[]byte) []byte {
	b := cat(parts...)
	return append(b, make([]byte, size-len(b))...)
}

// TestDequantizeHandComputed checks each layout against values worked out by
// hand from the ggml block definitions.
func TestDequantizeHandComputed(t *testing.T) {
	q8 := block(34, h(0.5), []byte{1, 0xfe, 127})
	q40 := block(18, h(2), []byte{0x9f})
	q41 := block(20, h(1), h(-1), []byte{0x21})
	q50 := block(22, h(1), []byte{0x01, 0x00, 0x01, 0x00}, []byte{0x00, 0x3f})
	q51 := block(24, h(0.5), h(1), []byte{0x01, 0, 0, 0}, []byte{0x01})
	q4k := make([]byte, 144)
	copy(q4k, cat(h(1), h(0.5)))
	q4k[4+0], q4k[4+4] = 2, 4 // scale/min pair 0
	q4k[4+1], q4k[4+5] = 3, 1 // pair 1
	q4k[4+8] = 0x21           // pair 4: scale 1, min 2
	q4k[16+0] = 0x53
	q4k[16+64] = 0x07
	q6k := make([]byte, 210)
	q6k[0] = 0x05   // ql
	q6k[128] = 0x01 // qh: bits 0-1 of weight 0
	q6k[192] = 2    // scale of sub-block 0
	copy(q6k[208:], h(1))
	q5k := make([]byte, 176)
	copy(q5k, cat(h(2), h(1)))
	q5k[4+0], q5k[4+4] = 1, 3
	q5k[16+0] = 0x01 // qh bit u1 for weight 0
	q5k[48+0] = 0x02 // ql low nibble of weight 0
	q2k := make([]byte, 84)
	q2k[0], q2k[1], q2k[2], q2k[8] = 0x21, 0x03, 0x12, 0x45 // group scale | min<<4
	q2k[16+0] = 0x1b                                        // weights 0, 32, 64, 96: 3, 2, 1, 0
	q2k[16+16] = 0x02                                       // weight 16: 2
	q2k[16+32] = 0x01                                       // weight 128: 1
	copy(q2k[80:], cat(h(1), h(0.5)))
	q3k := make([]byte, 110)
	q3k[0] = 0x01                  // hmask: weight 0 has its third bit
	q3k[32] = 0x0e                 // weights 0, 32: low bits 2, 3
	q3k[96], q3k[104] = 0x12, 0x22 // scale 0 stored 34 (2), scale 8 stored 33 (1)
	q3k[98], q3k[106] = 0x0c, 0x01 // scale 2 stored 28 (-4)
	copy(q3k[108:], h(0.5))
	iq4nl := block(18, h(2), []byte{0xf0})
	iq4xs := make([]byte, 136)
	copy(iq4xs, cat(h(0.5), []byte{0x42, 0x00}, []byte{0x02, 0xf0})) // sub-block 0 stored 34 (2), 3 stored 31 (-1)
	iq4xs[8] = 0x98                                                  // weights 0, 16: table 8 (1), 9 (13)
	iq4xs[8+48] = 0x0f                                               // weights 96, 112: table 15 (113), 0 (-127)
	bf := []byte{0xc0, 0x3f}
	f16 := []byte{0x00, 0x3e}

	cases := []struct {
		t    Type
		b    []byte
		want map[int]float32
	}{
		{Q8_0, q8, map[int]float32{0: 0.5, 1: -1, 2: 63.5, 3: 0}},
		{Q4_0, q40, map[int]float32{0: 14, 16: 2, 1: -16}},
		{Q4_1, q41, map[int]float32{0: 0, 16: 1, 1: -1}},
		{Q5_0, q50, map[int]float32{0: 0, 16: 0, 1: -1, 17: -13, 2: -16}},
		{Q5_1, q51, map[int]float32{0: 9.5, 16: 1, 1: 1}},
		{Q4_K, q4k, map[int]float32{0: 4, 32: 14.5, 128: 6, 1: -2}},
		{Q5_K, q5k, map[int]float32{0: 2*1*(2+16) - 1*3, 1: -3}},
		{Q6_K, q6k, map[int]float32{0: -22, 1: -64}},
		{Q2_K, q2k, map[int]float32{0: 2, 32: 3.5, 16: 6, 128: 3, 64: 0, 96: -0.5 * 0}},
		{Q3_K, q3k, map[int]float32{0: 2, 32: 2, 128: -2, 1: -4}},
		{IQ4_NL, iq4nl, map[int]float32{0: -254, 16: 226, 1: -254}},
		{IQ4_XS, iq4xs, map[int]float32{0: 1, 16: 13, 96: -56.5, 112: 63.5, 32: 0.5 * -32 * -127}},
		{BF16, bf, map[int]float32{0: 1.5}},
		{F16, f16, map[int]float32{0: 1.5}},
	}
	for _, c := range cases {
		y := make([]float32, c.t.BlockSize())
		if err := Dequantize(c.t, c.b, y); err != nil {
			t.Fatalf("%s: %v", c.t, err)
		}
		for i, w := range c.want {
			if y[i] != w {
				t.Errorf("%s: y[%d] = %v, want %v", c.t, i, y[i], w)
			}
		}
	}
}

func TestF16(t *testing.T) {
	for _, c := range []struct {
		f float32
		h uint16
	}{{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {5.960464477539063e-08, 0x0001}, {float32(math.Inf(1)), 0x7c00}, {0.333251953125, 0x3555}} {
		if got := F32ToF16(c.f); got != c.h {
			t.Errorf("F32ToF16(%v) = %#x, want %#x", c.f, got, c.h)
		}
		if got := F16ToF32(c.h); got != c.f {
			t.Errorf("F16ToF32(%#x) = %v, want %v", c.h, got, c.f)
		}
	}
	// every finite half round-trips
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		if h&0x7c00 == 0x7c00 {
			continue
		}
		if got := F32ToF16(F16ToF32(h)); got != h && !(h == 0x8000 && got == 0x8000) {
			t.Fatalf("round trip %#x -> %v -> %#x", h, F16ToF32(h), got)
		}
	}
}

// TestRoundTrip quantises Gaussian data and checks the relative RMS error of
// the dequantised values is within what each format's bit width allows.
func TestRoundTrip(t *testing.T) {
	tol := map[Type]float64{F32: 0, F16: 1e-3, BF16: 5e-3, Q8_0: 0.01, Q5_0: 0.05, Q5_1: 0.05, Q4_0: 0.1, Q4_1: 0.1, Q6_K: 0.03, Q5_K: 0.06, Q4_K: 0.12,
		Q3_K: 0.2, Q2_K: 0.4, IQ4_NL: 0.1, IQ4_XS: 0.1}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range SupportedTypes() {
		n := 4 * QKK
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		rb, err := RowBytes(typ, n)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, rb)
		if err := Quantize(typ, x, b); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		y := make([]float32, n)
		if err := Dequantize(typ, b, y); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		var se, ss float64
		for i := range x {
			d := float64(x[i] - y[i])
			se += d * d
			ss += float64(x[i]) * float64(x[i])
		}
		rel := math.Sqrt(se / ss)
		t.Logf("%s: relative RMS error %.4f", typ, rel)
		if rel > tol[typ] {
			t.Errorf("%s: relative RMS error %.4f > %.4f", typ, rel, tol[typ])
		}
	}
}

func TestErrors(t *testing.T) {
	if _, err := RowBytes(Q8_0, 33); err == nil {
		t.Error("RowBytes(Q8_0, 33) accepted a partial block")
	}
	if _, err := RowBytes(Type(99), 32); err == nil {
		t.Error("RowBytes of unknown type succeeded")
	}
	if err := Dequantize(IQ2_XXS, make([]byte, 66), make([]float32, 256)); err == nil {
		t.Error("Dequantize(IQ2_XXS) should report an unsupported type")
	} else if !strings.Contains(err.Error(), "IQ2_XXS") {
		t.Errorf("Dequantize(IQ2_XXS): %v does not name the type", err)
	}
	if err := Dequantize(Q8_0, make([]byte, 33), make([]float32, 32)); err == nil {
		t.Error("Dequantize with a short block succeeded")
	}
	if _, err := ParseType("Q9_9"); err == nil {
		t.Error("ParseType accepted Q9_9")
	}
	if got := Type(77).String(); got != "type(77)" {
		t.Errorf("Type(77).String() = %q", got)
	}
}

// TestLayoutSizes pins every known type's block to ggml's (the
// static_asserts of ggml-common.h): a GGUF file's tensor offsets depend on
// them even for the types Arborist refuses to compute with.
func TestLayoutSizes(t *testing.T) {
	for _, c := range []struct {
		t         Type
		block, ty int
		supported bool
	}{
		{Q2_K, 256, 84, true}, {Q3_K, 256, 110, true}, {Q4_K, 256, 144, true}, {Q5_K, 256, 176, true}, {Q6_K, 256, 210, true},
		{IQ4_NL, 32, 18, true}, {IQ4_XS, 256, 136, true},
		{IQ2_XXS, 256, 66, false}, {IQ2_XS, 256, 74, false}, {IQ2_S, 256, 82, false}, {IQ3_XXS, 256, 98, false},
		{IQ3_S, 256, 110, false}, {IQ1_S, 256, 50, false}, {IQ1_M, 256, 56, false}, {TQ1_0, 256, 54, false},
		{TQ2_0, 256, 66, false}, {MXFP4, 32, 17, false},
	} {
		if c.t.BlockSize() != c.block || c.t.TypeSize() != c.ty || c.t.Supported() != c.supported {
			t.Errorf("%s: block %d, %d bytes, supported %v; want %d, %d, %v", c.t, c.t.BlockSize(), c.t.TypeSize(), c.t.Supported(), c.block, c.ty, c.supported)
		}
		if got, err := ParseType(c.t.String()); err != nil || got != c.t {
			t.Errorf("ParseType(%q) = %v, %v", c.t.String(), got, err)
		}
	}
}
