package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"arborist/kernels/quant"
)

// WriteTensor is a tensor to be written. Exactly one of Data and Fill is set:
// Fill streams the bytes, so multi-gigabyte synthetic models never sit in
// memory whole, and must write exactly Bytes() bytes.
type WriteTensor struct {
	Name string
	Dims []uint64
	Type quant.Type
	Data []byte
	Fill func(w io.Writer) error
}

// Bytes is the size of the tensor's data.
func (t *WriteTensor) Bytes() uint64 {
	ti := TensorInfo{Dims: t.Dims, Type: t.Type}
	return ti.Bytes()
}

// Write encodes a GGUF v3 file. Metadata keys are written in the order given;
// general.alignment, when present, sets the alignment.
func Write(w io.Writer, kvs []KV, tensors []WriteTensor) error {
	align := uint64(DefaultAlignment)
	for _, kv := range kvs {
		if kv.Key == "general.alignment" {
			// any integer type Parse accepts (the spec writes uint32)
			f := File{KV: []KV{kv}, kvIndex: map[string]int{kv.Key: 0}}
			a, ok := f.Uint(kv.Key)
			if !ok || a == 0 || a&(a-1) != 0 || a > 1<<20 {
				return fmt.Errorf("gguf: write: general.alignment must be a power of two")
			}
			align = a
		}
	}
	cw := &countWriter{w: w}
	e := &encoder{w: cw}
	e.raw([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.Key)
		e.u32(uint32(kv.Type))
		if err := e.value(kv.Type, kv.Value); err != nil {
			return fmt.Errorf("gguf: write %q: %w", kv.Key, err)
		}
	}
	var off uint64
	offsets := make([]uint64, len(tensors))
	for i := range tensors {
		t := &tensors[i]
		if len(t.Dims) == 0 || len(t.Dims) > 4 {
			return fmt.Errorf("gguf: write %q: %d dimensions", t.Name, len(t.Dims))
		}
		if !t.Type.Known() || t.Dims[0]%uint64(t.Type.BlockSize()) != 0 {
			return fmt.Errorf("gguf: write %q: row of %d does not fit type %s", t.Name, t.Dims[0], t.Type)
		}
		if t.Data != nil && uint64(len(t.Data)) != t.Bytes() {
			return fmt.Errorf("gguf: write %q: %d bytes of data, shape needs %d", t.Name, len(t.Data), t.Bytes())
		}
		offsets[i] = off
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(off)
		off = alignUp(off+t.Bytes(), align)
	}
	e.pad(align)
	if e.err != nil {
		return e.err
	}
	base := cw.n
	for i := range tensors {
		t := &tensors[i]
		if gap := base + offsets[i] - cw.n; gap > 0 {
			e.raw(make([]byte, gap))
		}
		start := cw.n
		if t.Data != nil {
			e.raw(t.Data)
		} else if t.Fill != nil {
			if err := t.Fill(cw); err != nil {
				return fmt.Errorf("gguf: write %q: %w", t.Name, err)
			}
		}
		if e.err != nil {
			return e.err
		}
		if got := cw.n - start; got != t.Bytes() {
			return fmt.Errorf("gguf: write %q: wrote %d bytes, shape needs %d", t.Name, got, t.Bytes())
		}
	}
	return e.err
}

// WriteFile writes a GGUF file atomically: to a temporary file beside path,
// renamed into place only when complete, so a failure never leaves a
// half-written model under the final name.
func WriteFile(path string, kvs []KV, tensors []WriteTensor) error {
	return WriteFileFunc(path, func(w io.Writer) error { return Write(w, kvs, tensors) })
}

// WriteFileFunc writes path atomically with the bytes write produces.
func WriteFileFunc(path string, write func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(dirOf(path), ".arborist-*.gguf.tmp")
	if err != nil {
		return fmt.Errorf("gguf: create %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err = write(bw); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	// readable like a file os.WriteFile makes (CreateTemp makes 0600), or
	// with the whole mode of the file it replaces (a 0600 file stays 0600,
	// setgid kept), and on disk before the rename makes it visible under
	// its name
	mode := os.FileMode(0o644)
	if st, err := os.Lstat(path); err == nil && st.Mode().IsRegular() {
		mode = st.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
	}
	if err = tmp.Chmod(mode); err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	return nil
}

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if os.IsPathSeparator(path[i]) {
			return path[:i+1]
		}
	}
	return "."
}

type countWriter struct {
	w io.Writer
	n uint64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += uint64(n)
	return n, err
}

type encoder struct {
	w   *countWriter
	err error
	buf [8]byte
}

func (e *encoder) raw(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:4], v)
	e.raw(e.buf[:4])
}

func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:8], v)
	e.raw(e.buf[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.raw([]byte(s))
}

func (e *encoder) pad(align uint64) {
	if r := e.w.n % align; r != 0 {
		e.raw(make([]byte, align-r))
	}
}

func (e *encoder) value(t ValueType, v any) error {
	bad := func() error { return fmt.Errorf("value %T does not match type %d", v, t) }
	switch t {
	case TypeUint8:
		x, ok := v.(uint8)
		if !ok {
			return bad()
		}
		e.raw([]byte{x})
	case TypeInt8:
		x, ok := v.(int8)
		if !ok {
			return bad()
		}
		e.raw([]byte{byte(x)})
	case TypeUint16, TypeInt16:
		var x uint16
		switch y := v.(type) {
		case uint16:
			x = y
		case int16:
			x = uint16(y)
		default:
			return bad()
		}
		binary.LittleEndian.PutUint16(e.buf[:2], x)
		e.raw(e.buf[:2])
	case TypeUint32:
		x, ok := v.(uint32)
		if !ok {
			return bad()
		}
		e.u32(x)
	case TypeInt32:
		x, ok := v.(int32)
		if !ok {
			return bad()
		}
		e.u32(uint32(x))
	case TypeFloat32:
		x, ok := v.(float32)
		if !ok {
			return bad()
		}
		e.u32(math.Float32bits(x))
	case TypeBool:
		x, ok := v.(bool)
		if !ok {
			return bad()
		}
		if x {
			e.raw([]byte{1})
		} else {
			e.raw([]byte{0})
		}
	case TypeString:
		x, ok := v.(string)
		if !ok {
			return bad()
		}
		e.str(x)
	case TypeUint64:
		x, ok := v.(uint64)
		if !ok {
			return bad()
		}
		e.u64(x)
	case TypeInt64:
		x, ok := v.(int64)
		if !ok {
			return bad()
		}
		e.u64(uint64(x))
	case TypeFloat64:
		x, ok := v.(float64)
		if !ok {
			return bad()
		}
		e.u64(math.Float64bits(x))
	case TypeArray:
		return e.array(v)
	default:
		return fmt.Errorf("unknown value type %d", t)
	}
	return nil
}

func writeArr[T any](e *encoder, et ValueType, xs []T) error {
	e.u32(uint32(et))
	e.u64(uint64(len(xs)))
	for _, x := range xs {
		if err := e.value(et, x); err != nil {
			return err
		}
	}
	return nil
}

func (e *encoder) array(v any) error {
	switch xs := v.(type) {
	case []uint8:
		return writeArr(e, TypeUint8, xs)
	case []int8:
		return writeArr(e, TypeInt8, xs)
	case []uint16:
		return writeArr(e, TypeUint16, xs)
	case []int16:
		return writeArr(e, TypeInt16, xs)
	case []uint32:
		return writeArr(e, TypeUint32, xs)
	case []int32:
		return writeArr(e, TypeInt32, xs)
	case []float32:
		return writeArr(e, TypeFloat32, xs)
	case []bool:
		return writeArr(e, TypeBool, xs)
	case []string:
		return writeArr(e, TypeString, xs)
	case []uint64:
		return writeArr(e, TypeUint64, xs)
	case []int64:
		return writeArr(e, TypeInt64, xs)
	case []float64:
		return writeArr(e, TypeFloat64, xs)
	case []any: // nested arrays, as Parse returns them
		return writeArr(e, TypeArray, xs)
	}
	return fmt.Errorf("unsupported array value %T", v)
}

// Helpers that build KV entries with the right value type.

// String makes a string entry.
func String(k, v string) KV { return KV{k, TypeString, v} }

// Uint32 makes a uint32 entry.
func Uint32(k string, v uint32) KV { return KV{k, TypeUint32, v} }

// Int32 makes an int32 entry.
func Int32(k string, v int32) KV { return KV{k, TypeInt32, v} }

// Float32 makes a float32 entry.
func Float32(k string, v float32) KV { return KV{k, TypeFloat32, v} }

// Bool makes a bool entry.
func Bool(k string, v bool) KV { return KV{k, TypeBool, v} }

// Array makes an array entry; v is a slice such as []string or []float32.
func Array(k string, v any) KV { return KV{k, TypeArray, v} }
