package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"arborist/kernels/quant"
)

// header writes a GGUF v3 header with the given counts.
func header(nTensors, nKV uint64) *bytes.Buffer {
	var b bytes.Buffer
	b.WriteString(Magic)
	binary.Write(&b, binary.LittleEndian, uint32(3))
	binary.Write(&b, binary.LittleEndian, nTensors)
	binary.Write(&b, binary.LittleEndian, nKV)
	return &b
}

func putStr(b *bytes.Buffer, s string) {
	binary.Write(b, binary.LittleEndian, uint64(len(s)))
	b.WriteString(s)
}

// allocated runs fn and returns the bytes it allocated.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestEmptyStringArrayBounded: a metadata array of empty strings, which
// could take ~10x the file's size in memory (2.7 GiB for 256 MiB), is
// bounded: the file's arrays together may hold MaxArrayElements elements,
// checked before reading, and parsing allocates a small multiple of the
// file at most.
func TestEmptyStringArrayBounded(t *testing.T) {
	n := uint64(MaxArrayElements + 1)
	b := header(0, 1)
	putStr(b, "tokenizer.ggml.tokens")
	binary.Write(b, binary.LittleEndian, uint32(TypeArray))
	binary.Write(b, binary.LittleEndian, uint32(TypeString))
	binary.Write(b, binary.LittleEndian, n)
	b.Write(make([]byte, 8*n)) // n empty strings
	data := b.Bytes()
	var err error
	got := allocated(func() { _, err = Parse("strings.gguf", data) })
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("array of %d empty strings: err = %v", n, err)
	}
	if got > uint64(len(data))/4 {
		t.Errorf("refusing a %d-byte file allocated %d bytes", len(data), got)
	}
	// the count is checked against the bytes left for its element type
	b = header(0, 1)
	putStr(b, "k")
	binary.Write(b, binary.LittleEndian, uint32(TypeArray))
	binary.Write(b, binary.LittleEndian, uint32(TypeUint64))
	binary.Write(b, binary.LittleEndian, uint64(1000))
	b.Write(make([]byte, 1000)) // room for 1000 bytes, not 1000 uint64s
	if _, err := Parse("short.gguf", b.Bytes()); !errors.Is(err, ErrTruncated) {
		t.Errorf("1000 uint64 in 1000 bytes: err = %v", err)
	}
}

// TestTensorCountBounded: the tensor and metadata counts are bounded by
// fixed limits, not only by the file's size.
func TestTensorCountBounded(t *testing.T) {
	b := header(MaxTensors+1, 0)
	b.Write(make([]byte, 24*(MaxTensors+2)))
	if _, err := Parse("many.gguf", b.Bytes()); !errors.Is(err, ErrCorrupt) {
		t.Errorf("%d tensors: err = %v", MaxTensors+1, err)
	}
}

// TestHugeOffsetMessage: a tensor offset near 2^64 is refused with the
// offset as written, not the number it wraps to when added to the data
// offset.
func TestHugeOffsetMessage(t *testing.T) {
	b := header(1, 0)
	putStr(b, "w")
	binary.Write(b, binary.LittleEndian, uint32(1))
	binary.Write(b, binary.LittleEndian, uint64(32))
	binary.Write(b, binary.LittleEndian, uint32(quant.F32))
	off := uint64(1<<64 - 32)
	binary.Write(b, binary.LittleEndian, off)
	b.Write(make([]byte, 256))
	_, err := Parse("off.gguf", b.Bytes())
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "18446744073709551584") {
		t.Fatalf("offset 2^64-32: err = %v", err)
	}
}

func writeSample(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, sample(t), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNoMmap: Options.NoMmap reads the file into memory, and the weights
// then survive the file being truncated.
func TestNoMmap(t *testing.T) {
	p := writeSample(t)
	mf, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	rf, err := OpenWith(p, Options{NoMmap: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	if !mf.Mapped() || rf.Mapped() {
		t.Fatalf("Mapped: default %v, NoMmap %v", mf.Mapped(), rf.Mapped())
	}
	want := append([]byte(nil), mf.Data(&mf.Tensors[1])...)
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rf.Data(&rf.Tensors[1]), want) {
		t.Error("NoMmap data differs from the mapped data")
	}
	if err := rf.Check(); err != nil {
		t.Errorf("NoMmap Check after truncation: %v", err)
	}
}

// TestShrunkMapping: a mapped model truncated under the reader gives
// ErrShrunk, not SIGBUS with a Go stack trace: Check reports it between
// passes, and Go code reading under Guard gets the error instead of a
// crash.
func TestShrunkMapping(t *testing.T) {
	p := writeSample(t)
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); !errors.Is(err, ErrShrunk) || !strings.Contains(err.Error(), "--no-mmap") {
		t.Fatalf("Check after truncation: %v", err)
	}
	err = Guard(p, func() error {
		var sum byte
		for _, c := range f.Data(&f.Tensors[1]) {
			sum += c
		}
		if sum == 255 { // keeps the reads
			return errors.New("unexpected sum")
		}
		return nil
	})
	if !errors.Is(err, ErrShrunk) {
		t.Fatalf("reading a truncated mapping under Guard: %v", err)
	}
}

// TestStringsBounded: a GGUF whose metadata declared a 3 GiB string, or a
// million 3 KB tokens, made inspect take 6 GB (each string is copied out
// of the mapping). One string is bounded by MaxString and all of a file's
// together by MaxStringBytes, checked before the copy; the file here is
// sparse, so refusing it reads almost nothing.
func TestStringsBounded(t *testing.T) {
	dir := t.TempDir()
	sparse := func(name string, head []byte, size int64) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(head)
		if err := f.Truncate(size); err != nil {
			t.Skip(err)
		}
		f.Close()
		return p
	}
	b := header(0, 1)
	putStr(b, "general.name")
	binary.Write(b, binary.LittleEndian, uint32(TypeString))
	binary.Write(b, binary.LittleEndian, uint64(3<<30))
	huge := sparse("huge-string.gguf", b.Bytes(), 3<<30+1<<20)

	for p, want := range map[string]string{huge: "a string of 3221225472 bytes"} {
		var err error
		got := allocated(func() {
			var f *File
			if f, err = Open(p); err == nil {
				f.Close()
			}
		})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", filepath.Base(p), err, want)
		}
		if got > 16<<20 {
			t.Errorf("%s: refusing it allocated %d MiB", filepath.Base(p), got>>20)
		}
	}
	// a million 3 KB tokens pass MaxStringBytes; here the same array of
	// 3 KB strings against a budget of 30 KB (the file's budget scaled down)
	b = &bytes.Buffer{}
	binary.Write(b, binary.LittleEndian, uint32(TypeString))
	binary.Write(b, binary.LittleEndian, uint64(11))
	for i := 0; i < 11; i++ {
		putStr(b, strings.Repeat("t", 3000))
	}
	r := &reader{b: b.Bytes(), budget: MaxArrayElements, strBudget: 30000}
	r.value(TypeArray, 0)
	if !errors.Is(r.err, ErrCorrupt) || !strings.Contains(r.err.Error(), "strings of more than") {
		t.Errorf("11 strings of 3 KB against a 30 KB budget: %v", r.err)
	}
	r = &reader{b: b.Bytes(), budget: MaxArrayElements, strBudget: 33000}
	if v := r.value(TypeArray, 0); r.err != nil || len(v.([]string)) != 11 {
		t.Errorf("11 strings of 3 KB within a 33 KB budget: %v", r.err)
	}
}
