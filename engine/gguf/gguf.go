// Package gguf reads and writes GGUF model files (versions 2 and 3), the
// single-file format of llama.cpp and ollama.
//
// A file is a header (magic "GGUF", version, tensor count, metadata count),
// typed key/value metadata, tensor infos (name, dims, ggml type, offset), then
// padding to general.alignment and the tensor data. Open memory-maps the file
// so tensor data is never copied; Parse reads the same layout from a byte
// slice, which is what the fuzz target drives.
//
// Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
package gguf

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	"arborist/kernels/quant"
)

// Magic is the four bytes every GGUF file starts with.
const Magic = "GGUF"

// DefaultAlignment is used when general.alignment is absent.
const DefaultAlignment = 32

// Limits on what a file may ask the parser to allocate. Every count read
// from a file is checked against them (and against the bytes that remain)
// before anything is allocated, so a small hostile file costs bounded time
// and memory. They sit far above any real model: the largest vocabularies
// have 256K tokens (with as many scores, types and merges), models have at
// most a few thousand tensors, and llama.cpp itself refuses more layers
// than 512.
const (
	// MaxTensors is the most tensor infos a file may declare.
	MaxTensors = 1 << 16
	// MaxMetadata is the most metadata entries a file may declare.
	MaxMetadata = 1 << 16
	// MaxArrayElements is the most metadata array elements a whole file
	// may hold (summed over all its arrays, nested ones included): an
	// element costs up to 16 bytes in memory (a string header) however few
	// it takes in the file.
	MaxArrayElements = 1 << 22
	// MaxString is the longest string a file may hold (a key, a value,
	// an array element, a tensor name): chat templates take kilobytes, a
	// tokenizer's JSON a few megabytes.
	MaxString = 16 << 20
	// MaxStringBytes is the most bytes a file's strings may hold together:
	// a 256K-token vocabulary with its merges takes a few megabytes. Each
	// string is copied out of the file, so without it a sparse file
	// declaring a 3 GiB string or a million 3 KB tokens took gigabytes.
	MaxStringBytes = 256 << 20
)

// Sentinel errors, matched with errors.Is; Error values carry the path.
var (
	ErrBadMagic    = errors.New("gguf: not a GGUF file (bad magic)")
	ErrVersion     = errors.New("gguf: unsupported version")
	ErrTruncated   = errors.New("gguf: truncated file")
	ErrCorrupt     = errors.New("gguf: corrupt header")
	ErrUnknownType = errors.New("gguf: unknown tensor type")
	ErrNoTensor    = errors.New("gguf: missing tensor")
	ErrShape       = errors.New("gguf: wrong tensor shape")
	ErrMetadata    = errors.New("gguf: missing or invalid metadata")
)

// Error describes a failure reading a particular file.
type Error struct {
	Path string // file path, or "" for in-memory data
	Err  error
}

// Error formats the failure with the file's path.
func (e *Error) Error() string {
	if e.Path == "" {
		return e.Err.Error()
	}
	return e.Path + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ValueType is a GGUF metadata value type.
type ValueType uint32

// GGUF metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

// KV is one metadata entry. Value holds a Go value of the matching type:
// uint8, int8, uint16, int16, uint32, int32, float32, bool, string, uint64,
// int64, float64, or for arrays a slice of one of those ([]string, []float32,
// []int32, ...; nested arrays are []any).
type KV struct {
	Key   string
	Type  ValueType
	Value any
}

// TensorInfo describes one tensor. Dims are in ggml order: Dims[0] is the
// length of a row (the fastest-varying index).
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   quant.Type
	Offset uint64 // relative to the start of the data section
}

// Elements is the number of values in the tensor.
func (t *TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Bytes is the tensor's size in the file.
func (t *TensorInfo) Bytes() uint64 {
	bs := uint64(t.Type.BlockSize())
	if bs == 0 {
		return 0
	}
	return t.Elements() / bs * uint64(t.Type.TypeSize())
}

// File is a parsed GGUF file. Tensor data slices alias the mapped file and
// stay valid until Close.
type File struct {
	Path       string
	Version    uint32
	Alignment  uint64
	KV         []KV
	Tensors    []TensorInfo
	DataOffset uint64 // absolute offset of the data section
	data       []byte // whole file
	size       int64  // the file's size when opened (mapped files are checked against it)
	mapped     bool   // data is a memory mapping of the file
	fd         *os.File
	kvIndex    map[string]int
	tIndex     map[string]int
	closer     func() error
}

// Close releases the mapping. Tensor data must not be used afterwards.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	c := f.closer
	f.closer = nil
	f.data = nil
	return c()
}

func (f *File) errf(base error, format string, args ...any) error {
	return &Error{Path: f.Path, Err: fmt.Errorf("%w: "+format, append([]any{base}, args...)...)}
}

// Get returns the metadata entry for key.
func (f *File) Get(key string) (KV, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return KV{}, false
	}
	return f.KV[i], true
}

// String returns a string metadata value.
func (f *File) String(key string) (string, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return "", false
	}
	s, ok := kv.Value.(string)
	return s, ok
}

// Uint returns an integer metadata value of any integer type, as uint64.
func (f *File) Uint(key string) (uint64, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	switch v := kv.Value.(type) {
	case uint8:
		return uint64(v), true
	case uint16:
		return uint64(v), true
	case uint32:
		return uint64(v), true
	case uint64:
		return v, true
	case int8:
		return uint64(v), v >= 0
	case int16:
		return uint64(v), v >= 0
	case int32:
		return uint64(v), v >= 0
	case int64:
		return uint64(v), v >= 0
	}
	return 0, false
}

// Float returns a floating-point (or integer) metadata value as float64.
func (f *File) Float(key string) (float64, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	switch v := kv.Value.(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	if u, ok := f.Uint(key); ok {
		return float64(u), true
	}
	return 0, false
}

// Bool returns a boolean metadata value.
func (f *File) Bool(key string) (bool, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return false, false
	}
	b, ok := kv.Value.(bool)
	return b, ok
}

// Strings returns a string array metadata value.
func (f *File) Strings(key string) ([]string, bool) {
	kv, ok := f.Get(key)
	if !ok {
		return nil, false
	}
	s, ok := kv.Value.([]string)
	return s, ok
}

// Architecture returns general.architecture, or "" when absent.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

// Tensor returns the info for a named tensor.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Data returns the bytes of a tensor, aliasing the mapped file.
func (f *File) Data(t *TensorInfo) []byte {
	start := f.DataOffset + t.Offset
	return f.data[start : start+t.Bytes()]
}

// TensorData looks up a tensor by name, checks its type is one Arborist
// computes with and its dims match want (when want is non-nil), and returns
// its info and bytes.
func (f *File) TensorData(name string, want ...uint64) (*TensorInfo, []byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, nil, f.errf(ErrNoTensor, "%s", name)
	}
	if want != nil && !equalDims(t.Dims, want) {
		return nil, nil, f.errf(ErrShape, "%s is %v, want %v", name, t.Dims, want)
	}
	if !t.Type.Supported() {
		return nil, nil, f.errf(ErrUnknownType, "%s has type %s, which Arborist cannot compute with (supported: %s)", name, t.Type, supportedList())
	}
	return t, f.Data(t), nil
}

func supportedList() string {
	var names []string
	for _, t := range quant.SupportedTypes() {
		names = append(names, t.String())
	}
	return strings.Join(names, ", ")
}

func equalDims(a, b []uint64) bool {
	// trailing 1s are insignificant in ggml shapes
	for len(a) > 1 && a[len(a)-1] == 1 {
		a = a[:len(a)-1]
	}
	for len(b) > 1 && b[len(b)-1] == 1 {
		b = b[:len(b)-1]
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TypeCounts returns how many tensors (and how many bytes) each type holds,
// in descending byte order.
func (f *File) TypeCounts() []TypeCount {
	m := map[quant.Type]*TypeCount{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		c := m[t.Type]
		if c == nil {
			c = &TypeCount{Type: t.Type}
			m[t.Type] = c
		}
		c.Tensors++
		c.Bytes += t.Bytes()
		c.Params += t.Elements()
	}
	var out []TypeCount
	for _, c := range m {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
	return out
}

// TypeCount summarises the tensors of one type.
type TypeCount struct {
	Type    quant.Type
	Tensors int
	Params  uint64
	Bytes   uint64
}

// Params is the total number of tensor elements.
func (f *File) Params() uint64 {
	var n uint64
	for i := range f.Tensors {
		n += f.Tensors[i].Elements()
	}
	return n
}

// WeightBytes is the total size of the tensor data.
func (f *File) WeightBytes() uint64 {
	var n uint64
	for i := range f.Tensors {
		n += f.Tensors[i].Bytes()
	}
	return n
}

// Parse reads a GGUF file held in memory. path is used in error messages.
func Parse(path string, data []byte) (*File, error) {
	f := &File{Path: path, data: data, kvIndex: map[string]int{}, tIndex: map[string]int{}}
	r := &reader{b: data, budget: MaxArrayElements, strBudget: MaxStringBytes}
	if len(data) < 4 {
		return nil, f.errf(ErrTruncated, "%d bytes", len(data))
	}
	if string(data[:4]) != Magic {
		return nil, &Error{Path: path, Err: fmt.Errorf("%w: starts with %q", ErrBadMagic, data[:4])}
	}
	r.off = 4
	f.Version = r.u32()
	if r.err == nil && (f.Version < 2 || f.Version > 3) {
		return nil, f.errf(ErrVersion, "version %d (Arborist reads 2 and 3)", f.Version)
	}
	nTensors := r.u64()
	nKV := r.u64()
	if r.err != nil {
		return nil, f.errf(r.err, "in header")
	}
	// Each KV needs at least 12 bytes and each tensor info at least 24, so
	// counts beyond that are corruption, not a reason to allocate.
	if nKV > uint64(len(data))/12 || nTensors > uint64(len(data))/24 {
		return nil, f.errf(ErrCorrupt, "%d metadata entries and %d tensors cannot fit in %d bytes (the file is truncated or damaged)", nKV, nTensors, len(data))
	}
	if nKV > MaxMetadata || nTensors > MaxTensors {
		return nil, f.errf(ErrCorrupt, "%d metadata entries and %d tensors (Arborist reads at most %d and %d)", nKV, nTensors, MaxMetadata, MaxTensors)
	}
	f.KV = make([]KV, 0, nKV)
	for i := uint64(0); i < nKV; i++ {
		key := r.str()
		vt := ValueType(r.u32())
		v := r.value(vt, 0)
		if r.err != nil {
			return nil, f.errf(r.err, "metadata entry %d (%q)", i, key)
		}
		if _, dup := f.kvIndex[key]; dup {
			return nil, f.errf(ErrCorrupt, "duplicate metadata key %q", key)
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Type: vt, Value: v})
	}
	f.Alignment = DefaultAlignment
	if kv, ok := f.Get("general.alignment"); ok {
		a, ok := f.Uint("general.alignment")
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<20 {
			return nil, f.errf(ErrCorrupt, "general.alignment %v is not a power of two", kv.Value)
		}
		f.Alignment = a
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		var t TensorInfo
		t.Name = r.str()
		nd := r.u32()
		if r.err == nil && (nd == 0 || nd > 4) {
			return nil, f.errf(ErrCorrupt, "tensor %q has %d dimensions", t.Name, nd)
		}
		for j := uint32(0); j < nd && r.err == nil; j++ {
			t.Dims = append(t.Dims, r.u64())
		}
		t.Type = quant.Type(r.u32())
		t.Offset = r.u64()
		if r.err != nil {
			return nil, f.errf(r.err, "tensor info %d", i)
		}
		if !t.Type.Known() {
			return nil, f.errf(ErrUnknownType, "tensor %q has ggml type %d", t.Name, uint32(t.Type))
		}
		elems := uint64(1)
		for _, d := range t.Dims {
			if d == 0 || d > 1<<40 || elems > (1<<50)/d {
				return nil, f.errf(ErrCorrupt, "tensor %q has dims %v", t.Name, t.Dims)
			}
			elems *= d
		}
		if t.Dims[0]%uint64(t.Type.BlockSize()) != 0 {
			return nil, f.errf(ErrShape, "tensor %q: row of %d is not a whole number of %s blocks", t.Name, t.Dims[0], t.Type)
		}
		if t.Offset%f.Alignment != 0 {
			return nil, f.errf(ErrCorrupt, "tensor %q offset %d is not aligned to %d", t.Name, t.Offset, f.Alignment)
		}
		if _, dup := f.tIndex[t.Name]; dup {
			return nil, f.errf(ErrCorrupt, "duplicate tensor %q", t.Name)
		}
		f.tIndex[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	f.DataOffset = alignUp(uint64(r.off), f.Alignment)
	size := uint64(len(data))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		// each term is checked before the sum, so an offset near 2^64
		// cannot wrap into a small end
		if t.Offset > size || t.Bytes() > size || f.DataOffset+t.Offset+t.Bytes() > size {
			return nil, f.errf(ErrTruncated, "tensor %q at data offset %d (%d bytes) lies beyond the end of the file (%d bytes, data from %d)", t.Name, t.Offset, t.Bytes(), size, f.DataOffset)
		}
	}
	return f, nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// reader decodes little-endian values and records the first error.
type reader struct {
	b         []byte
	off       int
	err       error
	budget    uint64 // array elements still allowed (MaxArrayElements per file)
	strBudget uint64 // string bytes still allowed (MaxStringBytes per file)
}

func (r *reader) need(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.err = ErrTruncated
		return nil
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *reader) u8() uint8 {
	if b := r.need(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.need(2); b != nil {
		return uint16(b[0]) | uint16(b[1])<<8
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.need(4); b != nil {
		return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
	}
	return 0
}

func (r *reader) u64() uint64 {
	lo := uint64(r.u32())
	return lo | uint64(r.u32())<<32
}

func (r *reader) str() string {
	n := r.u64()
	switch {
	case r.err != nil:
		return ""
	case n > MaxString:
		r.err = fmt.Errorf("%w: a string of %d bytes (Arborist reads strings of at most %d)", ErrCorrupt, n, MaxString)
		return ""
	case n > r.strBudget:
		r.err = fmt.Errorf("%w: strings of more than %d bytes together (the limit per file)", ErrCorrupt, MaxStringBytes)
		return ""
	}
	r.strBudget -= n
	return string(r.need(n))
}

const maxDepth = 4

func (r *reader) value(t ValueType, depth int) any {
	switch t {
	case TypeUint8:
		return r.u8()
	case TypeInt8:
		return int8(r.u8())
	case TypeUint16:
		return r.u16()
	case TypeInt16:
		return int16(r.u16())
	case TypeUint32:
		return r.u32()
	case TypeInt32:
		return int32(r.u32())
	case TypeFloat32:
		return math.Float32frombits(r.u32())
	case TypeBool:
		b := r.u8()
		if r.err == nil && b > 1 {
			r.err = fmt.Errorf("%w: bool value %d", ErrCorrupt, b)
		}
		return b == 1
	case TypeString:
		return r.str()
	case TypeUint64:
		return r.u64()
	case TypeInt64:
		return int64(r.u64())
	case TypeFloat64:
		return math.Float64frombits(r.u64())
	case TypeArray:
		if depth >= maxDepth {
			r.err = fmt.Errorf("%w: arrays nested deeper than %d", ErrCorrupt, maxDepth)
			return nil
		}
		et := ValueType(r.u32())
		n := r.u64()
		if r.err != nil {
			return nil
		}
		// every element takes at least minSize bytes of the file, and
		// all arrays together at most MaxArrayElements elements
		if ms := minSize(et); ms > 0 && n > uint64(len(r.b)-r.off)/ms {
			r.err = fmt.Errorf("%w: array of %d elements of type %d cannot fit in the %d bytes left", ErrTruncated, n, et, len(r.b)-r.off)
			return nil
		}
		if n > r.budget {
			r.err = fmt.Errorf("%w: array of %d elements passes the limit of %d metadata array elements per file", ErrCorrupt, n, MaxArrayElements)
			return nil
		}
		r.budget -= n
		return r.array(et, int(n), depth)
	}
	if r.err == nil {
		r.err = fmt.Errorf("%w: unknown metadata value type %d", ErrCorrupt, t)
	}
	return nil
}

// minSize is the fewest file bytes one value of type t takes (0: unknown
// type, reported when read).
func minSize(t ValueType) uint64 {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64, TypeString:
		return 8 // a string is at least its 8-byte length
	case TypeArray:
		return 12 // element type and count
	}
	return 0
}

func readArray[T any](r *reader, n int, et ValueType, depth int) []T {
	out := make([]T, 0, min(n, 1<<16))
	for i := 0; i < n && r.err == nil; i++ {
		v, _ := r.value(et, depth+1).(T)
		out = append(out, v)
	}
	return out
}

func (r *reader) array(et ValueType, n, depth int) any {
	switch et {
	case TypeUint8:
		return readArray[uint8](r, n, et, depth)
	case TypeInt8:
		return readArray[int8](r, n, et, depth)
	case TypeUint16:
		return readArray[uint16](r, n, et, depth)
	case TypeInt16:
		return readArray[int16](r, n, et, depth)
	case TypeUint32:
		return readArray[uint32](r, n, et, depth)
	case TypeInt32:
		return readArray[int32](r, n, et, depth)
	case TypeFloat32:
		return readArray[float32](r, n, et, depth)
	case TypeBool:
		return readArray[bool](r, n, et, depth)
	case TypeString:
		return readArray[string](r, n, et, depth)
	case TypeUint64:
		return readArray[uint64](r, n, et, depth)
	case TypeInt64:
		return readArray[int64](r, n, et, depth)
	case TypeFloat64:
		return readArray[float64](r, n, et, depth)
	case TypeArray:
		return readArray[any](r, n, et, depth)
	}
	r.err = fmt.Errorf("%w: unknown array element type %d", ErrCorrupt, et)
	return nil
}
