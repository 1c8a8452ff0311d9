package gguf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"arborist/engine/model/modeltest/testfiles"
	"arborist/kernels/quant"
)

// sample builds a small GGUF with every metadata value type and two tensors.
func sample(t testing.TB) []byte {
	t.Helper()
	kvs := []KV{
		String("general.architecture", "llama"),
		{"u8", TypeUint8, uint8(7)},
		{"i8", TypeInt8, int8(-7)},
		{"u16", TypeUint16, uint16(700)},
		{"i16", TypeInt16, int16(-700)},
		Uint32("u32", 70000),
		Int32("i32", -70000),
		Float32("f32", 1.5),
		Bool("b", true),
		{"u64", TypeUint64, uint64(1) << 40},
		{"i64", TypeInt64, int64(-1) << 40},
		{"f64", TypeFloat64, 2.25},
		Array("strs", []string{"a", "bc", ""}),
		Array("f32s", []float32{1, 2, 3}),
		Array("i32s", []int32{-1, 0, 1}),
	}
	f32 := make([]byte, 4*4)
	copy(f32, []byte{0, 0, 0x80, 0x3f}) // 1.0
	q8 := make([]byte, 2*34)
	ts := []WriteTensor{
		{Name: "a", Dims: []uint64{4}, Type: quant.F32, Data: f32},
		{Name: "b", Dims: []uint64{32, 2}, Type: quant.Q8_0, Data: q8},
	}
	var buf bytes.Buffer
	if err := Write(&buf, kvs, ts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	data := sample(t)
	f, err := Parse("mem", data)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"u8": uint8(7), "i8": int8(-7), "u16": uint16(700), "i16": int16(-700), "u32": uint32(70000),
		"i32": int32(-70000), "f32": float32(1.5), "b": true, "u64": uint64(1) << 40, "i64": int64(-1) << 40,
		"f64": 2.25, "strs": []string{"a", "bc", ""}, "f32s": []float32{1, 2, 3}, "i32s": []int32{-1, 0, 1},
	}
	for k, w := range want {
		kv, ok := f.Get(k)
		if !ok {
			t.Errorf("missing key %q", k)
			continue
		}
		if !reflect.DeepEqual(kv.Value, w) {
			t.Errorf("%s = %#v, want %#v", k, kv.Value, w)
		}
	}
	if f.Architecture() != "llama" {
		t.Errorf("Architecture() = %q", f.Architecture())
	}
	ti, d, err := f.TensorData("a", 4)
	if err != nil {
		t.Fatal(err)
	}
	if ti.Type != quant.F32 || len(d) != 16 || d[3] != 0x3f {
		t.Errorf("tensor a: %+v %v", ti, d)
	}
	if _, _, err := f.TensorData("b", 32, 3); !errors.Is(err, ErrShape) {
		t.Errorf("wrong shape: err = %v, want ErrShape", err)
	}
	if _, _, err := f.TensorData("zz"); !errors.Is(err, ErrNoTensor) {
		t.Errorf("missing tensor: err = %v", err)
	}
	if f.DataOffset%32 != 0 {
		t.Errorf("data offset %d not aligned", f.DataOffset)
	}
}

func TestBadFiles(t *testing.T) {
	good := sample(t)
	mod := func(fn func(b []byte) []byte) []byte { return fn(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"magic", mod(func(b []byte) []byte { b[0] = 'X'; return b }), ErrBadMagic},
		{"version 1", mod(func(b []byte) []byte { b[4] = 1; return b }), ErrVersion},
		{"version 9", mod(func(b []byte) []byte { b[4] = 9; return b }), ErrVersion},
		{"huge kv count", mod(func(b []byte) []byte { b[23] = 0x7f; return b }), ErrCorrupt},
		{"truncated data", good[:len(good)-10], ErrTruncated},
	}
	for _, c := range cases {
		_, err := Parse("x.gguf", c.data)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
		if err != nil && !bytes.Contains([]byte(err.Error()), []byte("x.gguf")) {
			t.Errorf("%s: error %q does not name the file", c.name, err)
		}
	}
	// every truncation fails cleanly, never panics
	for n := 0; n < len(good); n++ {
		if _, err := Parse("t", good[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(good))
		}
	}
}

func TestUnknownTensorType(t *testing.T) {
	var buf bytes.Buffer
	ts := []WriteTensor{{Name: "w", Dims: []uint64{256}, Type: quant.IQ2_XXS, Data: make([]byte, quant.IQ2_XXS.TypeSize())}}
	if err := Write(&buf, nil, ts); err != nil {
		t.Fatal(err)
	}
	f, err := Parse("q2.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err) // a known layout parses...
	}
	if _, _, err := f.TensorData("w"); !errors.Is(err, ErrUnknownType) {
		t.Errorf("IQ2_XXS tensor: err = %v, want ErrUnknownType", err) // ...but is refused for compute
	}
	b := buf.Bytes()
	// patch the type id (after name, n_dims, one dim) to an id ggml never used
	off := bytes.Index(b, []byte("w")) + 1 + 4 + 8
	b[off] = 99
	if _, err := Parse("t99.gguf", b); !errors.Is(err, ErrUnknownType) {
		t.Errorf("type 99: err = %v, want ErrUnknownType", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.gguf")); err == nil || !os.IsNotExist(errors.Unwrap(err)) {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(dir, "text.gguf")
	os.WriteFile(p, []byte("hello, this is not a model"), 0o644)
	if _, err := Open(p); !errors.Is(err, ErrBadMagic) {
		t.Errorf("text file: %v", err)
	}
	if _, err := Open(dir); err == nil {
		t.Error("directory opened as a model")
	}
	good := filepath.Join(dir, "good.gguf")
	if err := WriteFileFunc(good, func(w io.Writer) error { _, err := w.Write(sample(t)); return err }); err != nil {
		t.Fatal(err)
	}
	f, err := Open(good)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 2 {
		t.Errorf("%d tensors", len(f.Tensors))
	}
	f.Close()
}

func TestSharedModels(t *testing.T) {
	dir := testfiles.Shared(t, "models")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	more, _ := filepath.Glob(filepath.Join(dir, "bench", "*.gguf"))
	paths = append(paths, more...)
	if len(paths) == 0 {
		t.Skipf("no models in %s", dir)
	}
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if f.Architecture() != "llama" || len(f.Tensors) == 0 {
			t.Errorf("%s: arch %q, %d tensors", p, f.Architecture(), len(f.Tensors))
		}
		f.Close()
	}
}

// FuzzParse feeds arbitrary bytes to the reader and checks properties, not
// only the absence of panics: parsing allocates at most a small multiple of
// the input (the limits of gguf.go, measured per input), and a file it
// accepts re-encodes with Write into a file that parses to the same
// metadata and tensors and re-encodes to the same bytes. The seeds are a
// valid file and damaged ones; they run in every `go test`.
func FuzzParse(f *testing.F) {
	good := sample(f)
	f.Add(good)
	f.Add(good[:40])
	f.Add([]byte("GGUF"))
	f.Add([]byte("GGUF\x03\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00"))
	bad := append([]byte(nil), good...)
	bad[30] ^= 0xff
	f.Add(bad)
	f.Fuzz(func(t *testing.T, data []byte) {
		var fl *File
		var err error
		used := allocated0(func() { fl, err = Parse("fuzz", data) })
		if limit := 64*uint64(len(data)) + 1<<20; used > limit {
			t.Fatalf("parsing %d bytes allocated %d (limit %d)", len(data), used, limit)
		}
		if err != nil {
			return
		}
		enc := func(fl *File) []byte {
			ts := make([]WriteTensor, len(fl.Tensors))
			for i := range fl.Tensors {
				ti := &fl.Tensors[i]
				ts[i] = WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: fl.Data(ti)}
			}
			var buf bytes.Buffer
			if err := Write(&buf, fl.KV, ts); err != nil {
				t.Fatalf("an accepted file does not re-encode: %v", err)
			}
			return buf.Bytes()
		}
		once := enc(fl)
		fl2, err := Parse("again", once)
		if err != nil {
			t.Fatalf("a re-encoded file is refused: %v", err)
		}
		if len(fl2.KV) != len(fl.KV) || len(fl2.Tensors) != len(fl.Tensors) {
			t.Fatalf("round trip: %d/%d entries, %d/%d tensors", len(fl2.KV), len(fl.KV), len(fl2.Tensors), len(fl.Tensors))
		}
		for i := range fl.Tensors {
			a, b := &fl.Tensors[i], &fl2.Tensors[i]
			if a.Name != b.Name || a.Type != b.Type || !reflect.DeepEqual(a.Dims, b.Dims) || !bytes.Equal(fl.Data(a), fl2.Data(b)) {
				t.Fatalf("tensor %q changed in the round trip", a.Name)
			}
		}
		if twice := enc(fl2); !bytes.Equal(once, twice) {
			t.Fatal("re-encoding is not stable")
		}
	})
}

// allocated0 is the bytes fn allocates (without a GC first: cheap enough
// to run per fuzz input).
func allocated0(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}
