package cuda

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"arborist/kernels/quant"
)

func TestParsePath(t *testing.T) {
	for in, want := range map[string]Path{"": Verified, "verified": Verified, "fast": Fast, " Fast ": Fast, "VERIFIED": Verified} {
		got, err := ParsePath(in)
		if err != nil || got != want {
			t.Errorf("ParsePath(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"quick", "1", "fastest"} {
		if _, err := ParsePath(in); err == nil || !strings.Contains(err.Error(), PathEnv) {
			t.Errorf("ParsePath(%q): %v, want an error naming %s", in, err, PathEnv)
		}
	}
	if !strings.HasPrefix(PathStatus(""), "verified path") || !strings.HasPrefix(PathStatus("fast"), "fast path") ||
		!strings.Contains(PathStatus("bogus"), "verified or fast") {
		t.Errorf("PathStatus: %q, %q, %q", PathStatus(""), PathStatus("fast"), PathStatus("bogus"))
	}
}

// The fast products cover every real shape and width with launches the
// hardware takes, the block width the smallest that holds the pass's rows
// (up to 64, 32 for F16: each weight read and unpacked once a pass).
func TestFastProductGeometry(t *testing.T) {
	widths := []int{1, 2, 7, 8, 9, 16, 17, 32, 33, 63, 64, 65, 128, 512}
	for _, typ := range WeightTypes {
		for _, s := range shapes {
			rows, cols := s[0], s[1]
			if cols%typ.BlockSize() != 0 {
				continue
			}
			for _, n := range widths {
				l, q8, ok, err := FastProductLaunch(typ, rows, cols, n)
				if err != nil {
					t.Fatalf("%v %dx%d n=%d: %v", typ, rows, cols, n, err)
				}
				if want := quantised(typ) || typ == quant.F16 && cols%8 == 0; ok != want {
					t.Fatalf("%v %dx%d: fast product %v, want %v", typ, rows, cols, ok, want)
				}
				if !ok {
					continue
				}
				known(t, l)
				suf, _ := suffix(typ)
				nb, most := fastWidth(suf, n), fastWidthMax(suf)
				if q8 != quantised(typ) || !strings.HasSuffix(l.Kernel, fmt.Sprintf("_%d", nb)) {
					t.Fatalf("%v n=%d: %s, quantised input %v", typ, n, l.Kernel, q8)
				}
				if n <= most && (l.Grid[1] != 1 || nb < n || (nb > 8 && nb/2 >= n)) {
					t.Fatalf("%v n=%d: %s grid %v: a pass of up to 64 rows is one block row of the smallest width", typ, n, l.Kernel, l.Grid)
				}
				if l.Grid[0]*mmWarps < rows || (l.Grid[0]-1)*mmWarps >= rows || l.Grid[1]*nb < n || (l.Grid[1]-1)*nb >= n {
					t.Fatalf("%v %dx%d n=%d: grid %v does not cover the output exactly", typ, rows, cols, n, l.Grid)
				}
			}
		}
	}
	for _, n := range []int{1, 64, 512} {
		for _, l := range []func() (Launch, error){
			func() (Launch, error) { return FastNormLaunch(n) },
			func() (Launch, error) { return FastGLULaunch(14336, n) },
			func() (Launch, error) { return FastRoPELaunch(quant.F16, n) },
		} {
			got, err := l()
			if err != nil {
				t.Fatal(err)
			}
			known(t, got)
		}
		l, ok, err := FastAttentionLaunch(quant.F32, 32, 8, 128, n)
		if err != nil || !ok {
			t.Fatalf("attention 32/8 heads: %v %v", ok, err)
		}
		known(t, l)
		if l.Grid != [3]int{8, n, 1} {
			t.Errorf("attention grid %v: a block per key/value head and row", l.Grid)
		}
	}
	if _, err := FastGLULaunch(100, 1); err == nil {
		t.Error("f_glu_q8 of rows that are not whole chunks")
	}
	// more query heads a key/value head than f_att takes, or wider heads:
	// the verified attention
	for _, s := range [][3]int{{32, 2, 64}, {8, 8, 512}} {
		if _, ok, err := FastAttentionLaunch(quant.F32, s[0], s[1], s[2], 1); ok || err != nil {
			t.Errorf("attention %v: ok %v, %v", s, ok, err)
		}
	}
}

// The stand-in driver runs the kernels it finds in its table (emu/
// kernels.cc): every kernel the backend loads is there.
func TestEmulatorTable(t *testing.T) {
	b, err := os.ReadFile("standin/emu/kernels.cc")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	var got []string
	for _, m := range regexp.MustCompile(`\bK\((\w+)\)`).FindAllStringSubmatch(src, -1) {
		if m[1] != "name" {
			got = append(got, m[1])
		}
	}
	for _, m := range regexp.MustCompile(`\bKMM\((\w+)\)`).FindAllStringSubmatch(src, -1) {
		if m[1] == "sfx" {
			continue
		}
		for _, nb := range fastWidths {
			if nb <= fastWidthMax(m[1]) {
				got = append(got, fmt.Sprintf("f_mm_%s_%d", m[1], nb))
			}
		}
	}
	want := slices.Clone(Kernels)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the stand-in's kernels:\n%v\nKernels:\n%v", got, want)
	}
}
