package cuda

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"arborist/kernels/quant"
)

// source is the kernels' source: arborist.cu and fast.cuh, which it
// includes.
func source(t *testing.T) string {
	t.Helper()
	var src strings.Builder
	for _, f := range []string{"kernels/arborist.cu", "kernels/fast.cuh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	return src.String()
}

// The kernel table is the source's list of extern "C" kernels, and every
// kernel a launch names is in it.
func TestKernelTableMatchesSource(t *testing.T) {
	src := source(t)
	var got []string
	for _, m := range regexp.MustCompile(`__global__ void (\w+)\(`).FindAllStringSubmatch(src, -1) {
		if m[1] != "name" && m[1] != "f_mm_" { // the macros' kernels, below
			got = append(got, m[1])
		}
	}
	// MMQ(name, T) expands to a kernel of that name
	for _, m := range regexp.MustCompile(`(?m)^MMQ\((\w+),`).FindAllStringSubmatch(src, -1) {
		got = append(got, m[1])
	}
	// FMMQ_ALL(T, sfx) to f_mm_sfx_8 ... f_mm_sfx_64, FMMH(NB) to f_mm_f16_NB
	for _, m := range regexp.MustCompile(`(?m)^FMMQ_ALL\(\w+, (\w+)\)`).FindAllStringSubmatch(src, -1) {
		for _, nb := range []int{8, 16, 32, 64} {
			got = append(got, fmt.Sprintf("f_mm_%s_%d", m[1], nb))
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^FMMH\((\d+)\)`).FindAllStringSubmatch(src, -1) {
		got = append(got, "f_mm_f16_"+m[1])
	}
	want := slices.Clone(Kernels)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("kernels in arborist.cu:\n%v\nKernels:\n%v", got, want)
	}
	// and the generated PTX, where make cuda has built it, has them all
	for _, arch := range []string{"sm_80", "sm_90"} {
		ptx, err := os.ReadFile("ptx/" + arch + ".ptx")
		if err != nil {
			continue
		}
		for _, k := range Kernels {
			if !strings.Contains(string(ptx), ".entry "+k+"(") {
				t.Errorf("%s.ptx lacks kernel %s (stale? make cuda)", arch, k)
			}
		}
	}
}

// The Go constants agree with the source's #defines.
func TestConstantsMatchSource(t *testing.T) {
	src := source(t)
	for name, want := range map[string]int{"TC_WARPS": tcWarps, "MM_WARPS": mmWarps, "MMQ_NB": mmqNB, "ATT_WARPS": attWarps, "ATT_MAXD": attMaxD / warp, "WARP": warp} {
		m := regexp.MustCompile(`#define ` + name + ` (\d+)`).FindStringSubmatch(src)
		if m == nil {
			t.Fatalf("#define %s not found", name)
		}
		if v, _ := strconv.Atoi(m[1]); v != want {
			t.Errorf("%s = %d in the source, %d in Go", name, v, want)
		}
	}
	// the row kernels' shared arrays are sized for ewBlock threads
	if !strings.Contains(src, "part[256]") || !strings.Contains(src, "bv[256]") || ewBlock != 256 {
		t.Errorf("rmsnorm/argmax shared arrays do not match ewBlock %d", ewBlock)
	}
}

func known(t *testing.T, l Launch) {
	t.Helper()
	if !slices.Contains(Kernels, l.Kernel) {
		t.Fatalf("launch of unknown kernel %q", l.Kernel)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
}

// Shapes of real models: (rows, cols) of their matrices, and widths W up
// to 512.
var shapes = [][2]int{
	{64, 64}, {512, 64}, {172, 64}, // stories260K (ffn 172)
	{2048, 2048}, {512, 2048}, {8192, 2048}, {2048, 8192}, {128256, 2048}, // llama-3.2-1b
	{4096, 4096}, {1024, 4096}, {14336, 4096}, {4096, 14336}, {128256, 4096}, // llama-3.1-8b
	{256000, 2304}, // gemma-2-2b's vocabulary
}

func TestMatMulGeometry(t *testing.T) {
	widths := []int{1, 2, 7, 8, 9, 15, 16, 17, 31, 64, 100, 255, 256, 511, 512}
	for _, typ := range WeightTypes {
		for _, s := range shapes {
			rows, cols := s[0], s[1]
			for _, n := range widths {
				p, err := PlanMatMul(typ, rows, cols, n)
				if cols%typ.BlockSize() != 0 {
					if err == nil {
						t.Fatalf("%v %dx%d: cols not whole blocks accepted", typ, rows, cols)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%v %dx%d n=%d: %v", typ, rows, cols, n, err)
				}
				for _, l := range p.Launches {
					known(t, l)
				}
				m := p.Launches[len(p.Launches)-1]
				switch {
				case p.Quantised:
					q := p.Launches[0]
					if q.Kernel != "quantize_q8" || q.Grid[0]*32 != cols || q.Grid[1] != n || q.Block[0] != warp {
						t.Fatalf("%v: quantize launch %+v for %dx%d", typ, q, n, cols)
					}
					if p.Scratch != int64(n*cols)+8*int64(n*cols/32) {
						t.Fatalf("%v: scratch %d", typ, p.Scratch)
					}
					fallthrough
				case !p.TensorCores:
					if m.Grid[0]*mmWarps < rows || (m.Grid[0]-1)*mmWarps >= rows || m.Grid[1]*mmqNB < n || (m.Grid[1]-1)*mmqNB >= n {
						t.Fatalf("%v %dx%d n=%d: grid %v does not cover the output exactly", typ, rows, cols, n, m.Grid)
					}
					if m.Block[0] != warp*mmWarps {
						t.Fatalf("block %v", m.Block)
					}
				default:
					if typ != quant.F16 && typ != quant.BF16 || rows%16 != 0 || cols%16 != 0 {
						t.Fatalf("%v %dx%d on tensor cores", typ, rows, cols)
					}
					if p.Pad%16 != 0 || p.Pad < n || p.Pad-n >= 16 || m.Grid[1]*16 != p.Pad || m.Grid[0]*16 != rows || m.Block[0] != warp*tcWarps {
						t.Fatalf("%v %dx%d n=%d: pad %d grid %v", typ, rows, cols, n, p.Pad, m.Grid)
					}
					if c := p.Launches[0]; c.Grid[0]*c.Block[0] < cols || c.Grid[1] != p.Pad {
						t.Fatalf("conversion %+v", c)
					}
					if p.Scratch != 2*int64(p.Pad*cols) {
						t.Fatalf("scratch %d", p.Scratch)
					}
				}
			}
		}
	}
	// F16 rows not a multiple of 16 take the float32 kernel
	if p, err := PlanMatMul(quant.F16, 172, 64, 4); err != nil || p.TensorCores || p.Launches[0].Kernel != "mm_f16" {
		t.Fatalf("F16 172x64: %+v %v", p, err)
	}
	for _, bad := range []quant.Type{quant.Q4_1, quant.Q2_K, quant.IQ4_XS, quant.Q8_1} {
		if _, err := PlanMatMul(bad, 64, 256, 1); err == nil || !strings.Contains(err.Error(), bad.String()) {
			t.Fatalf("%v: %v", bad, err)
		}
	}
	if _, err := PlanMatMul(quant.F32, 64, 64, 0); err == nil {
		t.Fatal("n=0 accepted")
	}
}

func TestOtherGeometry(t *testing.T) {
	for _, typ := range WeightTypes {
		for _, cols := range []int{256, 2048, 4096, 2304} {
			for _, n := range []int{1, 512} {
				l, err := EmbedLaunch(typ, cols, n)
				if err != nil {
					t.Fatal(err)
				}
				known(t, l)
				per := 1
				if quantised(typ) {
					per = 32
				}
				if l.Grid[0]*l.Block[0]*per < cols || l.Grid[1] != n {
					t.Fatalf("embed %v %d x %d: %+v", typ, n, cols, l)
				}
			}
		}
	}
	for _, n := range []int{1, 255, 256, 257, 512 * 14336} {
		for _, k := range []string{"add", "scale", "softcap", "add_row", "glu"} {
			l, err := ElementwiseLaunch(k, n)
			if err != nil {
				t.Fatal(err)
			}
			known(t, l)
			if l.Grid[0]*l.Block[0] < n || (l.Grid[0]-1)*l.Block[0] >= n {
				t.Fatalf("%s %d: %+v", k, n, l)
			}
		}
	}
	for _, rows := range []int{1, 512} {
		for _, k := range []string{"rmsnorm", "argmax"} {
			l, err := RowLaunch(k, rows)
			if err != nil {
				t.Fatal(err)
			}
			known(t, l)
		}
		for _, k := range []string{"gather", "store_kv_f32", "store_kv_f16"} {
			l, err := RowsLaunch(k, rows, 4096)
			if err != nil {
				t.Fatal(err)
			}
			known(t, l)
			if l.Grid[1] != rows || l.Grid[0]*l.Block[0] < 4096 {
				t.Fatalf("%s: %+v", k, l)
			}
		}
		l, err := RoPELaunch(rows, 32, 128, 128)
		if err != nil {
			t.Fatal(err)
		}
		known(t, l)
		if l.Grid[0]*l.Block[0] < 32*64 || l.Grid[1] != rows {
			t.Fatalf("rope: %+v", l)
		}
		for _, kv := range []quant.Type{quant.F32, quant.F16} {
			l, err := AttentionLaunch(kv, 32, 8, 128, rows)
			if err != nil {
				t.Fatal(err)
			}
			known(t, l)
			ls, scratch, err := CompactLaunches(kv, 32, 1024, rows)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range ls {
				known(t, l)
			}
			es := 4
			if kv == quant.F16 {
				es = 2
			}
			if scratch != int64(2*32*rows*1024*es) || ls[0].Grid[2] != 64 || ls[0].Grid[0]*ls[0].Block[0]*2 < 1024*es {
				t.Fatalf("compact %v: %+v scratch %d", kv, ls, scratch)
			}
		}
	}
	if _, err := RoPELaunch(1, 8, 12, 8); err == nil {
		t.Fatal("rope wider than the head accepted")
	}
	if _, err := AttentionLaunch(quant.F32, 8, 8, 512, 1); err == nil {
		t.Fatal("head dimension 512 accepted")
	}
	if _, err := AttentionLaunch(quant.F32, 6, 4, 64, 1); err == nil {
		t.Fatal("uneven GQA accepted")
	}
	if _, err := AttentionLaunch(quant.Q8_0, 8, 8, 64, 1); err == nil {
		t.Fatal("Q8_0 cache accepted")
	}
	if err := (Launch{Kernel: "add", Grid: [3]int{1, 70000, 1}, Block: [3]int{256, 1, 1}}).Check(); err == nil {
		t.Fatal("grid.y 70000 accepted")
	}
	if err := (Launch{Kernel: "add", Grid: [3]int{1, 1, 1}, Block: [3]int{2048, 1, 1}}).Check(); err == nil {
		t.Fatal("block 2048 accepted")
	}
}

func TestPTXArch(t *testing.T) {
	for _, c := range []struct {
		maj, min int
		want     string
	}{{8, 0, "sm_80"}, {8, 6, "sm_80"}, {8, 9, "sm_80"}, {9, 0, "sm_90"}, {10, 0, "sm_90"}, {7, 5, ""}} {
		got, err := PTXArch(c.maj, c.min)
		if got != c.want || (c.want == "") != (err != nil) {
			t.Errorf("%d.%d: %q %v", c.maj, c.min, got, err)
		}
	}
}

func TestPlan(t *testing.T) {
	b, err := WeightBytes(quant.Q4_K, 4096, 4096)
	if err != nil || b != 4096*16*144 {
		t.Fatalf("Q4_K 4096x4096: %d %v", b, err)
	}
	if _, err := WeightBytes(quant.Q4_K, 4096, 100); err == nil {
		t.Fatal("partial block accepted")
	}
	kv, err := KVBytes(32, 8192, 1024, quant.F16)
	if err != nil || kv != 2*32*8192*1024*2 {
		t.Fatalf("KV: %d %v", kv, err)
	}
	if _, err := KVBytes(1<<10, 1<<20, 1<<20, quant.F32); err != nil {
		t.Fatalf("huge but representable cache: %v", err)
	}
	if _, err := KVBytes(1<<30, 1<<30, 1<<30, quant.F32); err == nil {
		t.Fatal("overflowing cache accepted")
	}
	if _, err := KVBytes(1, 1, 1, quant.Q8_0); err == nil {
		t.Fatal("Q8_0 cache accepted")
	}
	const gib = 1 << 30
	if err := Fit("weights", 10*gib, 12*gib, 16*gib); err != nil {
		t.Fatal(err)
	}
	err = Fit("weights", 12*gib-Reserve+1, 12*gib, 16*gib)
	if err == nil || !strings.Contains(err.Error(), "12288.0 MiB of 16384.0 MiB are free") {
		t.Fatalf("over-reserve allocation: %v", err)
	}
	// llama-3.1-8b in Q4_K with an F16 cache of 8192 slots, batches of 512
	s := Shape{Layers: 32, Dim: 4096, FFN: 14336, QDim: 4096, KVDim: 1024, Vocab: 128256}
	for l := 0; l < 32; l++ {
		s.Matrices = append(s.Matrices, MatrixShape{quant.Q4_K, 4096, 4096}, MatrixShape{quant.Q4_K, 1024, 4096}, MatrixShape{quant.Q4_K, 1024, 4096},
			MatrixShape{quant.Q4_K, 4096, 4096}, MatrixShape{quant.Q4_K, 14336, 4096}, MatrixShape{quant.Q4_K, 14336, 4096}, MatrixShape{quant.Q6_K, 4096, 14336})
	}
	s.Matrices = append(s.Matrices, MatrixShape{quant.Q6_K, 128256, 4096})
	p, err := PlanModel(s, 8192, 512, quant.F16)
	if err != nil {
		t.Fatal(err)
	}
	if p.Weights < 4*gib || p.Weights > 5*gib || p.KV != 1*gib || p.Scratch != 512*14336+8*512*14336/32 {
		t.Fatalf("8B plan: %+v", p)
	}
	if p.Check(141*gib, 141*gib) != nil || p.Check(4*gib, 24*gib) == nil {
		t.Fatalf("8B plan check: %+v", p)
	}
}

// fakeSystem lays out a probe's files under a temporary folder.
func fakeSystem(t *testing.T, lib, module, node, beside, onPath bool) ProbeEnv {
	dir := t.TempDir()
	mk := func(p string, mode os.FileMode) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	env := ProbeEnv{
		LibDirs:     []string{filepath.Join(dir, "lib64"), filepath.Join(dir, "lib")},
		DriverFile:  filepath.Join(dir, "proc/driver/nvidia/version"),
		ControlNode: filepath.Join(dir, "dev/nvidiactl"),
		DeviceGlob:  filepath.Join(dir, "dev/nvidia[0-9]*"),
		Exe:         filepath.Join(dir, "bin/arborist"),
		Path:        filepath.Join(dir, "empty") + string(filepath.ListSeparator) + filepath.Join(dir, "usr/bin"),
	}
	mk(env.Exe, 0o755)
	mk(filepath.Join(dir, "dev/nvidia-uvm"), 0o644)   // not a GPU
	mk(filepath.Join(dir, "lib64/libcuda.so"), 0o644) // the link-time stub is not the driver
	if lib {
		mk(filepath.Join(dir, "lib/libcuda.so.1"), 0o644)
	}
	if module {
		mk(env.DriverFile, 0o444)
		mk(env.ControlNode, 0o666) // not a GPU either
	}
	if node {
		mk(filepath.Join(dir, "dev/nvidia0"), 0o666)
	}
	if beside {
		mk(filepath.Join(dir, "bin", Binary), 0o755)
	}
	if onPath {
		mk(filepath.Join(dir, "usr/bin", Binary), 0o755)
	}
	return env
}

func TestProbe(t *testing.T) {
	for _, c := range []struct {
		name                              string
		lib, module, node, beside, onPath bool
		reason, binDir                    string
	}{
		{"bare machine", false, false, false, false, false, NoDriver, ""},
		{"library without module", true, false, true, true, false, NoDriver, ""},
		{"module without library", false, true, true, true, false, NoDriver, ""},
		{"driver without GPU", true, true, false, true, false, NoDevice, ""},
		{"not built", true, true, true, false, false, NotInstalled, ""},
		{"beside", true, true, true, true, true, "", "bin"},
		{"on PATH", true, true, true, false, true, "", "usr/bin"},
	} {
		env := fakeSystem(t, c.lib, c.module, c.node, c.beside, c.onPath)
		bin, err := Probe(env)
		if c.reason != "" {
			if !IsUnavailable(err) || !strings.HasPrefix(err.Error(), c.reason+": ") {
				t.Errorf("%s: got %q, %v; want reason %q", c.name, bin, err, c.reason)
			}
			continue
		}
		if err != nil || !strings.HasSuffix(bin, filepath.Join(c.binDir, Binary)) {
			t.Errorf("%s: got %q, %v", c.name, bin, err)
		}
	}
	// a non-executable file of that name is not the program
	env := fakeSystem(t, true, true, true, false, false)
	if err := os.WriteFile(filepath.Join(filepath.Dir(env.Exe), Binary), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Probe(env); err == nil || !strings.Contains(err.Error(), NotInstalled) {
		t.Fatalf("non-executable arborist-cuda: %v", err)
	}
	// the control node alone shows the module (gVisor has no /proc entry)
	env = fakeSystem(t, true, true, true, true, false)
	if err := os.Remove(env.DriverFile); err != nil {
		t.Fatal(err)
	}
	if _, err := Probe(env); err != nil {
		t.Fatalf("control node without /proc entry: %v", err)
	}
	if err := os.Remove(env.ControlNode); err != nil {
		t.Fatal(err)
	}
	if _, err := Probe(env); err == nil || !strings.Contains(err.Error(), NoDriver) {
		t.Fatalf("neither /proc entry nor control node: %v", err)
	}
	if e := SystemProbeEnv(); e.DriverFile == "" || len(e.LibDirs) == 0 || e.DeviceGlob == "" {
		t.Fatalf("system probe env %+v", e)
	}
}

// TestCompactTail: compacting only CompactTail's part, through the
// kernels' indexing (kv_gather and kv_put, emulated here word for word)
// on the cache seen from slot off, leaves every plane as the whole
// compaction does.
func TestCompactTail(t *testing.T) {
	const planes, slots, rowWords = 4, 40, 3
	r := rand.New(rand.NewSource(1))
	// gatherPut runs kv_gather then kv_put over k kept slots, the cache
	// starting base words into kv
	gatherPut := func(kv []uint16, base int, keep []int) {
		k := len(keep)
		scratch := make([]uint16, planes*k*rowWords)
		for p := 0; p < planes; p++ {
			for j := 0; j < k; j++ {
				for i := 0; i < rowWords; i++ {
					scratch[(p*k+j)*rowWords+i] = kv[base+(p*slots+keep[j])*rowWords+i]
				}
			}
		}
		for p := 0; p < planes; p++ {
			for j := 0; j < k; j++ {
				for i := 0; i < rowWords; i++ {
					kv[base+(p*slots+j)*rowWords+i] = scratch[(p*k+j)*rowWords+i]
				}
			}
		}
	}
	keeps := [][]int{{}, {0}, {0, 1, 2}, {1, 0}, {5, 0, 1, 9, 2}, {0, 1, 2, 9, 4}, {0, 1, 2, 3, 5, 7, 9}}
	for range 200 {
		used := 1 + r.Intn(slots)
		pre := r.Intn(used + 1)
		keep := make([]int, pre)
		for i := range keep {
			keep[i] = i
		}
		for _, s := range r.Perm(used - pre)[:r.Intn(used-pre+1)] {
			keep = append(keep, pre+s)
		}
		keeps = append(keeps, keep)
	}
	for _, keep := range keeps {
		kv := make([]uint16, planes*slots*rowWords)
		for i := range kv {
			kv[i] = uint16(i)
		}
		want := slices.Clone(kv)
		gatherPut(want, 0, keep)
		off, tail := CompactTail(keep)
		for i, s := range tail {
			if s < 0 || s+off != keep[off+i] {
				t.Fatalf("keep %v: off %d, tail %v", keep, off, tail)
			}
		}
		if off < len(keep) && keep[off] == off {
			t.Fatalf("keep %v: off %d stops at a slot in place", keep, off)
		}
		gatherPut(kv, off*rowWords, tail)
		if !slices.Equal(kv, want) {
			t.Fatalf("keep %v: compacting slots from %d as %v differs from the whole compaction", keep, off, tail)
		}
	}
}
