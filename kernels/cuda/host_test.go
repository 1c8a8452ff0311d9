package cuda

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"arborist/kernels/quant"
)

// TestQuantOnHost builds the kernels' weight-unpacking code (quant.cuh) for
// the host with the C compiler and checks it, without a GPU, against
// kernels/quant: every weight of every chunk equals quant.Dequantize's, and
// the integer dot product mm_q computes with 8-bit activations equals the
// float64 dot product of the dequantised weights and activations.
func TestQuantOnHost(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		if cc, err = exec.LookPath("cc"); err != nil {
			t.Skip("no C compiler to build kernels/hostcheck.c")
		}
	}
	bin := filepath.Join(t.TempDir(), "hostcheck")
	if out, err := exec.Command(cc, "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-o", bin, "kernels/hostcheck.c", "-lm").CombinedOutput(); err != nil {
		t.Fatalf("building hostcheck: %v\n%s", err, out)
	}
	r := rand.New(rand.NewSource(7))
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		for trial := 0; trial < 4; trial++ {
			const cols = 512
			w := make([]float32, cols)
			for i := range w {
				w[i] = float32(r.NormFloat64() * 0.1 * float64(1+trial))
				if trial == 3 && i%7 == 0 {
					w[i] = 0 // a sparse row
				}
			}
			rb, _ := quant.RowBytes(typ, cols)
			row := make([]byte, rb)
			if err := quant.Quantize(typ, w, row); err != nil {
				t.Fatal(err)
			}
			deq := make([]float32, cols)
			if err := quant.Dequantize(typ, row, deq); err != nil {
				t.Fatal(err)
			}
			// activations quantised as quantize_q8 does: scale amax/127,
			// round to nearest even
			xq := make([]int8, cols)
			xd := make([]float32, cols/32)
			xs := make([]float32, cols/32)
			for c := 0; c < cols/32; c++ {
				var amax float32
				x := make([]float32, 32)
				for j := range x {
					x[j] = float32(r.NormFloat64())
					amax = max(amax, float32(math.Abs(float64(x[j]))))
				}
				d := amax / 127
				sum := 0
				for j, v := range x {
					q := int8(math.RoundToEven(float64(v * (1 / d))))
					xq[32*c+j] = q
					sum += int(q)
				}
				xd[c], xs[c] = d, d*float32(sum)
			}
			var in bytes.Buffer
			in.Write(row)
			for _, q := range xq {
				in.WriteByte(byte(q))
			}
			binary.Write(&in, binary.LittleEndian, xd)
			binary.Write(&in, binary.LittleEndian, xs)
			cmd := exec.Command(bin, strconv.Itoa(int(typ)), strconv.Itoa(cols))
			cmd.Stdin = &in
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: hostcheck: %v", typ, err)
			}
			lines := strings.Fields(string(out))
			if len(lines) != cols+1 {
				t.Fatalf("%v: %d lines of output", typ, len(lines))
			}
			for i := 0; i < cols; i++ {
				got, _ := strconv.ParseFloat(lines[i], 32)
				if math.Abs(got-float64(deq[i])) > 1e-6*math.Abs(float64(deq[i]))+1e-9 {
					t.Fatalf("%v trial %d: weight %d = %g, quant.Dequantize says %g", typ, trial, i, got, deq[i])
				}
			}
			var ref, mag float64
			for i := 0; i < cols; i++ {
				xv := float64(xd[i/32]) * float64(xq[i])
				ref += float64(deq[i]) * xv
				mag += math.Abs(float64(deq[i]) * xv)
			}
			got, _ := strconv.ParseFloat(lines[cols], 64)
			if math.Abs(got-ref) > 1e-5*mag+1e-9 {
				t.Fatalf("%v trial %d: dot %g, float64 reference %g (magnitude %g)", typ, trial, got, ref, mag)
			}
		}
	}
}
