//go:build cuda

package cuda

import (
	_ "embed"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"arborist/kernels"
	"arborist/kernels/quant"
)

// The PTX make cuda compiles from kernels/arborist.cu, one per target.
//
//go:embed ptx/sm_80.ptx
var ptxSM80 string

//go:embed ptx/sm_90.ptx
var ptxSM90 string

// Device is the CUDA backend: kernels.Device on the first GPU. Its methods
// may be called from any goroutine, one at a time (a mutex serialises them;
// each call binds the CUDA context to its OS thread for its duration).
//
// Device faults (a failed launch, a lost device) cannot be reported through
// the methods of kernels.Device that return nothing; they panic with the
// driver's message, since the context is unusable after them.
type Device struct {
	mu     sync.Mutex
	dev    cu.Device
	ctx    cu.CUContext
	mod    cu.Module
	fn     map[string]cu.Function
	desc   string
	arch   string
	allocs map[cu.DevicePtr]int64 // everything allocated, freed by Close
	buf    [nScratch]scratch
	rope   []float32 // RoPE's cos and sin tables, end to end, for one upload
	closed bool
	// fp is the fast path's state, nil on the verified path (path.go):
	// every primitive below is recorded there instead of launched
	fp *fastState
}

type scratch struct {
	ptr  cu.DevicePtr
	size int64
	// held is a host copy of the bytes the last upload left at ptr, nil
	// when unknown. A copy from pageable host memory waits for every
	// launch before it, so uploading a pass's RoPE tables and tree mask
	// again at every layer would stall the GPU once per layer; uploadTo
	// skips a copy of the bytes the buffer already holds.
	held []byte
}

// Scratch buffers, each grown to the largest use and kept.
const (
	sX       = iota // MatMul's host input
	sOut            // MatMul's host output
	sQ8             // quantised activations
	sXH             // activations rounded for the tensor cores
	sIdx            // token ids, gathered rows, kept slots (int32)
	sMask           // a tree mask (bytes)
	sRoPE           // RoPE tables: cos, then sin
	sArg            // argmax results (int32)
	sCompact        // KV compaction
	nScratch
)

// New opens the first CUDA device, loads the kernels' PTX for its
// architecture and returns the backend on the path PathEnv names (the
// verified path when it is unset). threads is ignored (the GPU's
// parallelism is the launches').
func New(threads int) (*Device, error) {
	p, err := ParsePath(os.Getenv(PathEnv))
	if err != nil {
		return nil, err
	}
	return NewPath(threads, p)
}

// NewPath is New on path p.
func NewPath(threads int, p Path) (*Device, error) {
	_ = threads
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: counting devices: %w", err)
	}
	if n < 1 {
		return nil, fmt.Errorf("cuda: %s: the driver reports no CUDA device", NoDevice)
	}
	dev, err := cu.GetDevice(0)
	if err != nil {
		return nil, fmt.Errorf("cuda: device 0: %w", err)
	}
	maj, err := dev.Attribute(cu.ComputeCapabilityMajor)
	if err != nil {
		return nil, fmt.Errorf("cuda: compute capability: %w", err)
	}
	mnr, err := dev.Attribute(cu.ComputeCapabilityMinor)
	if err != nil {
		return nil, fmt.Errorf("cuda: compute capability: %w", err)
	}
	arch, err := PTXArch(maj, mnr)
	if err != nil {
		return nil, err
	}
	name, _ := dev.Name()
	total, _ := dev.TotalMem()
	d := &Device{dev: dev, arch: arch, fn: map[string]cu.Function{}, allocs: map[cu.DevicePtr]int64{},
		desc: fmt.Sprintf("%s (compute %d.%d, %.0f GiB, PTX %s)", name, maj, mnr, float64(total)/(1<<30), arch)}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if d.ctx, err = dev.MakeContext(cu.SchedAuto); err != nil {
		return nil, fmt.Errorf("cuda: creating a context on %s: %w", name, err)
	}
	ptx := ptxSM80
	if arch == "sm_90" {
		ptx = ptxSM90
	}
	if d.mod, err = cu.LoadData(ptx); err != nil {
		d.ctx.Destroy()
		return nil, fmt.Errorf("cuda: loading the %s kernels on %s (the driver JIT-compiles the PTX): %w", arch, name, err)
	}
	for _, k := range Kernels {
		f, err := d.mod.Function(k)
		if err != nil {
			d.ctx.Destroy()
			return nil, fmt.Errorf("cuda: kernel %s: %w", k, err)
		}
		d.fn[k] = f
	}
	if p == Fast {
		if d.fp, err = newFast(); err != nil {
			d.mod.Unload()
			d.ctx.Destroy()
			return nil, err
		}
	}
	return d, nil
}

// Path is the path the device issues passes on.
func (d *Device) Path() Path {
	if d.fp != nil {
		return Fast
	}
	return Verified
}

// Describe names the device, its compute capability, memory and PTX, and
// the path it issues passes on.
func (d *Device) Describe() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fp != nil {
		return d.desc + "; " + d.fp.describe()
	}
	return d.desc + "; verified path"
}

// Name identifies the backend.
func (d *Device) Name() string { return "cuda" }

// Threads is 1: the host side is one thread issuing launches.
func (d *Device) Threads() int { return 1 }

// enter serialises a call and makes the context current on its thread.
func (d *Device) enter() func() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		panic("cuda: device used after Close")
	}
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		runtime.UnlockOSThread()
		d.mu.Unlock()
		panic(fmt.Sprintf("cuda: making the context current: %v", err))
	}
	return func() {
		runtime.UnlockOSThread()
		d.mu.Unlock()
	}
}

func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("cuda: %v", err))
	}
}

// Close frees every allocation and the context.
func (d *Device) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cu.SetCurrentContext(d.ctx) == nil {
		if d.fp != nil {
			d.fp.ops = nil // nothing will read what they compute
			d.fp.stream.Synchronize()
			d.fp.close()
		}
		cu.Synchronize()
		for p := range d.allocs {
			cu.MemFree(p)
		}
		d.mod.Unload()
	}
	d.ctx.Destroy()
	d.allocs, d.closed = nil, true
}

// alloc takes bytes of device memory for what, after checking them
// against the free memory.
func (d *Device) alloc(what string, bytes int64) (cu.DevicePtr, error) {
	free, total, err := cu.MemInfo()
	if err != nil {
		return 0, fmt.Errorf("cuda: free memory: %w", err)
	}
	if err := Fit(what, bytes, free, total); err != nil {
		return 0, err
	}
	if bytes < 4 {
		bytes = 4
	}
	p, err := cu.MemAlloc(bytes)
	if err != nil {
		return 0, fmt.Errorf("cuda: allocating %d bytes for %s: %w", bytes, what, err)
	}
	d.allocs[p] = bytes
	return p, nil
}

func (d *Device) free(p cu.DevicePtr) {
	if _, ok := d.allocs[p]; ok {
		must(cu.MemFree(p))
		delete(d.allocs, p)
	}
}

// scratch returns scratch buffer i with at least bytes bytes.
func (d *Device) scratch(i int, bytes int64) cu.DevicePtr {
	b := &d.buf[i]
	if b.size >= bytes && b.ptr != 0 {
		return b.ptr
	}
	size := max(bytes, 2*b.size, 1<<16) // grow geometrically: a tree mask grows every step
	if b.ptr != 0 {
		must(cu.Synchronize()) // launches in flight may read it
		d.free(b.ptr)
		b.ptr, b.size, b.held = 0, 0, nil
	}
	p, err := d.alloc("scratch", size)
	if err != nil {
		size = bytes
		p, err = d.alloc("scratch", size)
	}
	must(err)
	b.ptr, b.size = p, size // the size actually allocated
	return p
}

// uploadTo copies bytes bytes at src into scratch buffer i, unless the
// buffer holds them already (scratch.held). Only uploadTo writes the
// buffers it is used for; kernels never do.
func (d *Device) uploadTo(i int, src unsafe.Pointer, bytes int64) cu.DevicePtr {
	p := d.scratch(i, bytes)
	if bytes > 0 {
		b := &d.buf[i]
		host := unsafe.Slice((*byte)(src), bytes)
		if b.held != nil && string(b.held) == string(host) {
			return p
		}
		must(cu.MemcpyHtoD(p, src, bytes)) // a failed copy panics: the device is lost then
		b.held = append(b.held[:0], host...)
	}
	return p
}

func (d *Device) uploadInts(i int, v []int) cu.DevicePtr {
	b := make([]int32, len(v))
	for j, x := range v {
		b[j] = int32(x)
	}
	if len(b) == 0 {
		return d.scratch(i, 4)
	}
	return d.uploadTo(i, unsafe.Pointer(&b[0]), 4*int64(len(b)))
}

// Kernel arguments are passed as 8-byte slots (gorgonia.org/cu copies 8
// bytes from each); a 4-byte int or float sits in the low half, which the
// driver reads.
func ptr(p cu.DevicePtr) uint64 { return uint64(p) }
func i32(v int) uint64          { return uint64(uint32(int32(v))) }
func f32(v float32) uint64      { return uint64(math.Float32bits(v)) }

func (d *Device) launch(l Launch, args ...uint64) {
	ps := make([]unsafe.Pointer, len(args))
	for i := range args {
		ps[i] = unsafe.Pointer(&args[i])
	}
	if err := d.fn[l.Kernel].Launch(l.Grid[0], l.Grid[1], l.Grid[2], l.Block[0], l.Block[1], l.Block[2], 0, cu.Stream{}, ps); err != nil {
		panic(fmt.Sprintf("cuda: launching %s (grid %v, block %v): %v", l.Kernel, l.Grid, l.Block, err))
	}
}

func (d *Device) launchOK(l Launch, err error) Launch {
	must(err)
	return l
}

// ------------------------------------------------------------ memory

type tensor struct {
	ptr cu.DevicePtr
	n   int
}

func (t *tensor) Len() int { return t.n }

func tp(t kernels.Tensor) *tensor {
	x, ok := t.(*tensor)
	if !ok {
		panic(fmt.Sprintf("cuda: a %T is not a CUDA tensor", t))
	}
	return x
}

// NewTensor allocates a zeroed tensor of n float32s.
func (d *Device) NewTensor(n int) (kernels.Tensor, error) {
	defer d.enter()()
	b, err := TensorBytes(n)
	if err != nil {
		return nil, err
	}
	p, err := d.alloc(fmt.Sprintf("a tensor of %d values", n), b)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		if d.fp != nil { // on the fast path's stream, so that its launches come after it
			must(cu.MemsetD32Async(p, 0, int64(n), d.fp.stream))
		} else {
			must(cu.MemsetD32(p, 0, int64(n)))
		}
	}
	return &tensor{p, n}, nil
}

// View is n values of t from offset on: t's device pointer moved by
// offset values. It holds no allocation of its own.
func (d *Device) View(t kernels.Tensor, offset, n int) kernels.Tensor {
	x := tp(t)
	if offset < 0 || n < 0 || offset+n > x.n {
		panic(fmt.Sprintf("cuda: a view of values [%d, %d) of a tensor of %d", offset, offset+n, x.n))
	}
	return &tensor{x.ptr + cu.DevicePtr(4*offset), n}
}

// NewVector stores v on the device.
func (d *Device) NewVector(v []float32) (kernels.Tensor, error) {
	t, err := d.NewTensor(len(v))
	if err != nil {
		return nil, err
	}
	d.Upload(t, v)
	return t, nil
}

// Upload copies src into dst[:len(src)].
func (d *Device) Upload(dst kernels.Tensor, src []float32) {
	t := tp(dst)
	if len(src) > t.n {
		panic(fmt.Sprintf("cuda: uploading %d values into a tensor of %d", len(src), t.n))
	}
	if len(src) == 0 {
		return
	}
	if d.fp != nil {
		defer d.record()()
		d.fp.add(op{kind: opUpload, x: t.ptr, item: d.fp.stageFloats(0, src)})
		return
	}
	defer d.enter()()
	must(cu.MemcpyHtoD(t.ptr, unsafe.Pointer(&src[0]), 4*int64(len(src))))
}

// Download copies src[:len(dst)] into dst, after the launches before it.
func (d *Device) Download(dst []float32, src kernels.Tensor) {
	t := tp(src)
	if len(dst) > t.n {
		panic(fmt.Sprintf("cuda: downloading %d values from a tensor of %d", len(dst), t.n))
	}
	if len(dst) == 0 {
		return
	}
	if d.fp != nil {
		defer d.record()()
		d.flush(readBack{dst: unsafe.Pointer(&dst[0]), src: t.ptr, bytes: 4 * int64(len(dst))})
		return
	}
	defer d.enter()()
	must(cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), t.ptr, 4*int64(len(dst))))
}

// ----------------------------------------------------------- weights

type matrix struct {
	t          quant.Type
	rows, cols int
	rowBytes   int
	ptr        cu.DevicePtr
}

func (m *matrix) Rows() int        { return m.rows }
func (m *matrix) Cols() int        { return m.cols }
func (m *matrix) Type() quant.Type { return m.t }

func mp(w kernels.Matrix) *matrix {
	m, ok := w.(*matrix)
	if !ok {
		panic(fmt.Sprintf("cuda: a %T is not a CUDA matrix", w))
	}
	return m
}

// NewMatrix uploads a weight matrix once, in its GGUF layout.
func (d *Device) NewMatrix(t quant.Type, data []byte, rows, cols int) (kernels.Matrix, error) {
	if _, err := suffix(t); err != nil {
		return nil, err
	}
	if cols%t.BlockSize() != 0 {
		return nil, fmt.Errorf("cuda: %v row of %d weights is not whole blocks of %d", t, cols, t.BlockSize())
	}
	b, err := WeightBytes(t, rows, cols)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) < b {
		return nil, fmt.Errorf("cuda: %dx%d %v matrix needs %d bytes, got %d", rows, cols, t, b, len(data))
	}
	defer d.enter()()
	p, err := d.alloc(fmt.Sprintf("a %dx%d %v matrix", rows, cols, t), b)
	if err != nil {
		return nil, err
	}
	if d.fp != nil { // from pageable memory the copy is staged before it returns
		must(cu.MemcpyHtoDAsync(p, unsafe.Pointer(&data[0]), b, d.fp.stream))
	} else {
		must(cu.MemcpyHtoD(p, unsafe.Pointer(&data[0]), b))
	}
	return &matrix{t: t, rows: rows, cols: cols, rowBytes: int(b / int64(rows)), ptr: p}, nil
}

// prepared records the forms of one input that the scratch buffers hold
// (quantised to 8 bits in sQ8, rounded to f16 in sXH), each as the launch
// that wrote it and where, so that products sharing the input skip
// writing the same bytes again. A buffer is regrown (and may come back at
// the same address, emptied) only for a larger n x cols, which the record
// tells apart.
type prepared struct {
	q8, half preparation
}

type preparation struct {
	l        Launch
	dst, src cu.DevicePtr
	n, cols  int
}

// matmul launches out[n x rows] = x[n x cols] W^T on device buffers. With
// prep, the input's preparation is launched only when prep does not
// record the same launch of the same input into the same buffer already;
// without, always.
func (d *Device) matmul(out cu.DevicePtr, m *matrix, x cu.DevicePtr, n int, prep *prepared) {
	p, err := PlanMatMul(m.t, m.rows, m.cols, n)
	must(err)
	mm := p.Launches[len(p.Launches)-1]
	reuse := prep != nil
	if !reuse {
		prep = &prepared{}
	}
	prepare := func(have *preparation, dst cu.DevicePtr, args ...uint64) {
		now := preparation{l: p.Launches[0], dst: dst, src: x, n: n, cols: m.cols}
		if reuse && *have == now {
			return
		}
		d.launch(p.Launches[0], args...)
		*have = now
	}
	switch {
	case p.Quantised:
		s := d.scratch(sQ8, p.Scratch)
		xd := s + cu.DevicePtr(n*m.cols)
		xs := xd + cu.DevicePtr(4*n*m.cols/32)
		prepare(&prep.q8, s, ptr(s), ptr(xd), ptr(xs), ptr(x), i32(m.cols))
		d.launch(mm, ptr(out), ptr(m.ptr), uint64(m.rowBytes), ptr(s), ptr(xd), ptr(xs), i32(m.rows), i32(m.cols), i32(n))
	case p.TensorCores:
		xh := d.scratch(sXH, p.Scratch)
		prepare(&prep.half, xh, ptr(xh), ptr(x), i32(n), i32(m.cols))
		d.launch(mm, ptr(out), ptr(m.ptr), ptr(xh), i32(m.rows), i32(m.cols), i32(n))
	default:
		d.launch(mm, ptr(out), ptr(m.ptr), ptr(x), i32(m.rows), i32(m.cols), i32(n))
	}
}

// MatMulT is MatMul on device tensors.
func (d *Device) MatMulT(out kernels.Tensor, w kernels.Matrix, x kernels.Tensor, n int) {
	m, o, xt := mp(w), tp(out), tp(x)
	if o.n < n*m.rows || xt.n < n*m.cols {
		panic(fmt.Sprintf("cuda: MatMulT of %d rows: out %d, x %d values for a %dx%d matrix", n, o.n, xt.n, m.rows, m.cols))
	}
	if n == 0 {
		return
	}
	if d.fp != nil {
		defer d.record()()
		d.fp.add(op{kind: opMatMul, outs: [3]cu.DevicePtr{o.ptr}, ms: [3]*matrix{m}, nm: 1, x: xt.ptr, n: n})
		return
	}
	defer d.enter()()
	d.matmul(o.ptr, m, xt.ptr, n, nil)
}

// MatMulMulti multiplies x by each of ws into the matching outs, preparing
// x (quantised to 8 bits, or rounded to f16 for the tensor cores) once for
// the products that take it in the same form, rather than once each: Q, K
// and V, and gate and up, share their input, and each preparation is a
// launch. The preparation skipped is the same launch on the same input
// into the same buffer, which the products only read, so each out is, bit
// for bit, what MatMulT writes. An output that is x itself falls back to
// MatMulT each, as x then changes between the products.
func (d *Device) MatMulMulti(outs []kernels.Tensor, ws []kernels.Matrix, x kernels.Tensor, n int) {
	if len(outs) != len(ws) {
		panic(fmt.Sprintf("cuda: MatMulMulti of %d matrices into %d outputs", len(ws), len(outs)))
	}
	xt := tp(x)
	for i, w := range ws {
		m, o := mp(w), tp(outs[i])
		if o.n < n*m.rows || xt.n < n*m.cols {
			panic(fmt.Sprintf("cuda: MatMulMulti of %d rows: out %d, x %d values for a %dx%d matrix", n, o.n, xt.n, m.rows, m.cols))
		}
		if o.ptr == xt.ptr {
			for i, w := range ws {
				d.MatMulT(outs[i], w, x, n)
			}
			return
		}
	}
	if n == 0 {
		return
	}
	if d.fp != nil {
		defer d.record()()
		for a := 0; a < len(ws); a += 3 {
			o := op{kind: opMatMul, x: xt.ptr, n: n}
			for i := a; i < min(a+3, len(ws)); i++ {
				o.outs[o.nm], o.ms[o.nm] = tp(outs[i]).ptr, mp(ws[i])
				o.nm++
			}
			d.fp.add(o)
		}
		return
	}
	defer d.enter()()
	var prep prepared
	for i, w := range ws {
		d.matmul(tp(outs[i]).ptr, mp(w), xt.ptr, n, &prep)
	}
}

// MatMul computes on host slices: upload x, launch, download.
func (d *Device) MatMul(out []float32, w kernels.Matrix, x []float32, n int) {
	m := mp(w)
	if n == 0 {
		return
	}
	if len(x) < n*m.cols || len(out) < n*m.rows {
		panic(fmt.Sprintf("cuda: MatMul of %d rows: out %d, x %d values for a %dx%d matrix", n, len(out), len(x), m.rows, m.cols))
	}
	if d.fp != nil {
		// the product a pass would compute, on the fast path's stream:
		// x up through the staging buffer, the result home
		defer d.record()()
		d.flush() // the scratch buffers may grow, which waits for the device
		runtime.LockOSThread()
		must(cu.SetCurrentContext(d.ctx))
		xp, outp := d.scratch(sX, 4*int64(n*m.cols)), d.scratch(sOut, 4*int64(n*m.rows))
		runtime.UnlockOSThread()
		d.fp.add(op{kind: opUpload, x: xp, item: d.fp.stageFloats(0, x[:n*m.cols])})
		d.fp.add(op{kind: opMatMul, outs: [3]cu.DevicePtr{outp}, ms: [3]*matrix{m}, nm: 1, x: xp, n: n})
		d.flush(readBack{dst: unsafe.Pointer(&out[0]), src: outp, bytes: 4 * int64(n*m.rows)})
		return
	}
	defer d.enter()()
	xp := d.uploadTo(sX, unsafe.Pointer(&x[0]), 4*int64(n*m.cols))
	op := d.scratch(sOut, 4*int64(n*m.rows))
	d.matmul(op, m, xp, n, nil)
	must(cu.MemcpyDtoH(unsafe.Pointer(&out[0]), op, 4*int64(n*m.rows)))
}

// Embed looks up rows ids of table.
func (d *Device) Embed(dst kernels.Tensor, table kernels.Matrix, ids []int) error {
	m, t := mp(table), tp(dst)
	for _, id := range ids {
		if id < 0 || id >= m.rows {
			return fmt.Errorf("cuda: token id %d outside the embedding table's %d rows", id, m.rows)
		}
	}
	if t.n < len(ids)*m.cols {
		return fmt.Errorf("cuda: %d embedding rows of %d do not fit a tensor of %d", len(ids), m.cols, t.n)
	}
	if len(ids) == 0 {
		return nil
	}
	l, err := EmbedLaunch(m.t, m.cols, len(ids))
	if err != nil {
		return err
	}
	if d.fp != nil {
		defer d.record()()
		d.fp.add(op{kind: opEmbed, out: t.ptr, ms: [3]*matrix{m}, n: len(ids), item: d.fp.stageInts(0, ids)})
		return nil
	}
	defer d.enter()()
	idp := d.uploadInts(sIdx, ids)
	if quantised(m.t) {
		d.launch(l, ptr(t.ptr), ptr(m.ptr), uint64(m.rowBytes), ptr(idp), i32(m.cols))
	} else {
		d.launch(l, ptr(t.ptr), ptr(m.ptr), ptr(idp), i32(m.cols))
	}
	return nil
}

// ----------------------------------------------------- row operations

func (d *Device) elementwise(kernel string, n int, args ...uint64) {
	if n <= 0 {
		return
	}
	if d.fp != nil {
		panic("cuda: elementwise on the fast path")
	}
	defer d.enter()()
	d.launch(d.launchOK(ElementwiseLaunch(kernel, n)), args...)
}

func need(t *tensor, n int, what string) {
	if t.n < n {
		panic(fmt.Sprintf("cuda: %s needs %d values, the tensor has %d", what, n, t.n))
	}
}

// RMSNorm normalises rows rows of dim values.
func (d *Device) RMSNorm(out, x, w kernels.Tensor, rows, dim int, eps float32) {
	o, xt, wt := tp(out), tp(x), tp(w)
	need(o, rows*dim, "RMSNorm")
	need(xt, rows*dim, "RMSNorm")
	need(wt, dim, "RMSNorm weights")
	if rows == 0 {
		return
	}
	if d.fp != nil {
		defer d.record()()
		d.fp.add(op{kind: opRMSNorm, out: o.ptr, x: xt.ptr, w: wt.ptr, rows: rows, dim: dim, f: eps, item: -1})
		return
	}
	defer d.enter()()
	d.launch(d.launchOK(RowLaunch("rmsnorm", rows)), ptr(o.ptr), ptr(xt.ptr), ptr(wt.ptr), i32(dim), f32(eps))
}

// AddRow adds b to each of rows rows.
func (d *Device) AddRow(x, b kernels.Tensor, rows, dim int) {
	xt, bt := tp(x), tp(b)
	need(xt, rows*dim, "AddRow")
	need(bt, dim, "AddRow bias")
	if d.fp != nil {
		if rows*dim > 0 {
			defer d.record()()
			d.fp.add(op{kind: opAddRow, x: xt.ptr, y: bt.ptr, rows: rows, dim: dim})
		}
		return
	}
	d.elementwise("add_row", rows*dim, ptr(xt.ptr), ptr(bt.ptr), i32(rows*dim), i32(dim))
}

// Add adds y to x.
func (d *Device) Add(x, y kernels.Tensor, n int) {
	xt, yt := tp(x), tp(y)
	need(xt, n, "Add")
	need(yt, n, "Add")
	if d.fp != nil {
		if n > 0 {
			defer d.record()()
			d.fp.add(op{kind: opAdd, x: xt.ptr, y: yt.ptr, n: n})
		}
		return
	}
	d.elementwise("add", n, ptr(xt.ptr), ptr(yt.ptr), i32(n))
}

// Scale multiplies x by s.
func (d *Device) Scale(x kernels.Tensor, n int, s float32) {
	xt := tp(x)
	need(xt, n, "Scale")
	if d.fp != nil {
		if n > 0 {
			defer d.record()()
			d.fp.add(op{kind: opScale, x: xt.ptr, n: n, f: s})
		}
		return
	}
	d.elementwise("scale", n, ptr(xt.ptr), i32(n), f32(s))
}

// Softcap maps x to c*tanh(x/c).
func (d *Device) Softcap(x kernels.Tensor, n int, c float32) {
	xt := tp(x)
	need(xt, n, "Softcap")
	if d.fp != nil {
		if n > 0 {
			defer d.record()()
			d.fp.add(op{kind: opSoftcap, x: xt.ptr, n: n, f: c})
		}
		return
	}
	d.elementwise("softcap", n, ptr(xt.ptr), i32(n), f32(c))
}

// GLU: g = act(g) * u.
func (d *Device) GLU(g, u kernels.Tensor, n int, gelu bool) {
	gt, ut := tp(g), tp(u)
	need(gt, n, "GLU")
	need(ut, n, "GLU")
	if d.fp != nil {
		if n > 0 {
			defer d.record()()
			d.fp.add(op{kind: opGLU, x: gt.ptr, y: ut.ptr, n: n, flag: gelu})
		}
		return
	}
	ge := 0
	if gelu {
		ge = 1
	}
	d.elementwise("glu", n, ptr(gt.ptr), ptr(ut.ptr), i32(n), i32(ge))
}

// RoPE rotates rows rows of x by the host tables cos and sin.
func (d *Device) RoPE(x kernels.Tensor, rows int, s kernels.RoPEShape, cos, sin []float32) {
	xt := tp(x)
	need(xt, rows*s.Heads*s.HeadDim, "RoPE")
	half := s.RopeDim / 2
	if len(cos) < rows*half || len(sin) < rows*half {
		panic(fmt.Sprintf("cuda: RoPE tables of %d/%d values for %d rows of %d pairs", len(cos), len(sin), rows, half))
	}
	if rows == 0 {
		return
	}
	l := d.launchOK(RoPELaunch(rows, s.Heads, s.RopeDim, s.HeadDim))
	if d.fp != nil {
		defer d.record()()
		n := rows * half
		d.fp.add(op{kind: opRoPE, x: xt.ptr, n: rows, rope: s, item: d.fp.stageFloats(sliceID(cos), cos[:n]), item2: d.fp.stageFloats(sliceID(sin), sin[:n])})
		return
	}
	defer d.enter()()
	// one copy for both tables: a copy from pageable memory waits for
	// every launch before it, so two would stall the GPU twice a pass
	n := rows * half
	cp := d.scratch(sRoPE, 8*int64(n))
	if n > 0 {
		d.rope = append(append(d.rope[:0], cos[:n]...), sin[:n]...)
		cp = d.uploadTo(sRoPE, unsafe.Pointer(&d.rope[0]), 8*int64(n))
	}
	sp := cp + cu.DevicePtr(4*n)
	neox := 0
	if s.Neox {
		neox = 1
	}
	d.launch(l, ptr(xt.ptr), ptr(cp), ptr(sp), i32(s.Heads), i32(s.HeadDim), i32(s.RopeDim), i32(neox))
}

// Gather copies rows[j] of src to row j of dst.
func (d *Device) Gather(dst, src kernels.Tensor, rows []int, dim int) {
	dt, st := tp(dst), tp(src)
	need(dt, len(rows)*dim, "Gather")
	for _, r := range rows {
		if r < 0 || (r+1)*dim > st.n {
			panic(fmt.Sprintf("cuda: Gather of row %d of %d values from a tensor of %d", r, dim, st.n))
		}
	}
	if len(rows) == 0 || dim == 0 {
		return
	}
	l := d.launchOK(RowsLaunch("gather", len(rows), dim))
	if d.fp != nil {
		defer d.record()()
		d.fp.add(op{kind: opGather, out: dt.ptr, x: st.ptr, n: len(rows), dim: dim, item: d.fp.stageInts(0, rows)})
		return
	}
	defer d.enter()()
	rp := d.uploadInts(sIdx, rows)
	d.launch(l, ptr(dt.ptr), ptr(st.ptr), ptr(rp), i32(dim))
}

// Argmax of each of rows rows of cols values.
func (d *Device) Argmax(dst []int, x kernels.Tensor, rows, cols int) {
	xt := tp(x)
	need(xt, rows*cols, "Argmax")
	if rows == 0 {
		return
	}
	if d.fp != nil {
		defer d.record()()
		d.fp.add(op{kind: opArgmax, x: xt.ptr, rows: rows, dim: cols, item: -1})
		got := make([]int32, rows)
		d.flushArgmax(got)
		for i, v := range got {
			dst[i] = int(v)
		}
		return
	}
	defer d.enter()()
	ap := d.scratch(sArg, 4*int64(rows))
	d.launch(d.launchOK(RowLaunch("argmax", rows)), ptr(ap), ptr(xt.ptr), i32(cols))
	got := make([]int32, rows)
	must(cu.MemcpyDtoH(unsafe.Pointer(&got[0]), ap, 4*int64(rows)))
	for i, v := range got {
		dst[i] = int(v)
	}
}

// ------------------------------------------------------------ KV cache

type kvCache struct {
	d                    *Device
	ptr                  cu.DevicePtr
	layers, slots, width int
	t                    quant.Type
	es                   int
	bytes                int64
}

func (k *kvCache) Layers() int      { return k.layers }
func (k *kvCache) Cap() int         { return k.slots }
func (k *kvCache) Width() int       { return k.width }
func (k *kvCache) Type() quant.Type { return k.t }
func (k *kvCache) Bytes() uint64    { return uint64(k.bytes) }

// Free releases the cache's device memory.
func (k *kvCache) Free() {
	if k.ptr == 0 {
		return
	}
	k.d.mu.Lock()
	closed := k.d.closed
	k.d.mu.Unlock()
	if closed { // Close freed every allocation already
		k.ptr = 0
		return
	}
	if k.d.fp != nil {
		k.d.mu.Lock()
		k.d.flush() // what is recorded may use the cache
		k.d.mu.Unlock()
	}
	defer k.d.enter()()
	must(cu.Synchronize())
	k.d.free(k.ptr)
	k.ptr = 0
}

func kp(kv kernels.KV) *kvCache {
	k, ok := kv.(*kvCache)
	if !ok {
		panic(fmt.Sprintf("cuda: a %T is not a CUDA cache", kv))
	}
	if k.ptr == 0 {
		panic("cuda: KV cache used after Free")
	}
	return k
}

// NewKV allocates a zeroed cache.
func (d *Device) NewKV(layers, slots, width int, t quant.Type) (kernels.KV, error) {
	_, es, err := kvSuffix(t)
	if err != nil {
		return nil, err
	}
	b, err := KVBytes(layers, slots, width, t)
	if err != nil {
		return nil, err
	}
	defer d.enter()()
	p, err := d.alloc(fmt.Sprintf("a KV cache of %d layers x %d slots x %d %v values", layers, slots, width, t), b)
	if err != nil {
		return nil, err
	}
	if d.fp != nil {
		must(cu.MemsetD8Async(p, 0, b, d.fp.stream))
	} else {
		must(cu.MemsetD8(p, 0, b))
	}
	return &kvCache{d: d, ptr: p, layers: layers, slots: slots, width: width, t: t, es: es, bytes: b}, nil
}

// StoreKV writes rows keys and values into layer's slots from slot on.
func (d *Device) StoreKV(kv kernels.KV, layer, slot int, k, v kernels.Tensor, rows int) {
	c, kt, vt := kp(kv), tp(k), tp(v)
	if layer < 0 || layer >= c.layers || slot < 0 || slot+rows > c.slots {
		panic(fmt.Sprintf("cuda: StoreKV of %d rows at layer %d slot %d of a %dx%d cache", rows, layer, slot, c.layers, c.slots))
	}
	need(kt, rows*c.width, "StoreKV keys")
	need(vt, rows*c.width, "StoreKV values")
	if rows == 0 {
		return
	}
	suf, _, _ := kvSuffix(c.t)
	l := d.launchOK(RowsLaunch("store_kv_"+suf, rows, c.width))
	if d.fp != nil {
		defer d.record()()
		d.fp.add(op{kind: opStoreKV, kv: c, layer: layer, x: kt.ptr, y: vt.ptr, n: rows, item: d.fp.stageInts(tagSlot, []int{slot})})
		return
	}
	defer d.enter()()
	d.launch(l, ptr(c.ptr), ptr(kt.ptr), ptr(vt.ptr), i32(layer), i32(c.slots), i32(c.width), i32(slot))
}

// Attention over layer's slots 0..past+n-1 with mask (nil: causal).
func (d *Device) Attention(out, q kernels.Tensor, kv kernels.KV, layer, past, n int, mask []bool, s kernels.AttnShape) {
	c, ot, qt := kp(kv), tp(out), tp(q)
	if c.width != s.KVHeads*s.HeadDim {
		panic(fmt.Sprintf("cuda: Attention with %d KV heads of %d over a cache of width %d", s.KVHeads, s.HeadDim, c.width))
	}
	if layer < 0 || layer >= c.layers || past < 0 || past+n > c.slots {
		panic(fmt.Sprintf("cuda: Attention of %d rows after %d at layer %d of a %dx%d cache", n, past, layer, c.layers, c.slots))
	}
	total := past + n
	if mask != nil && len(mask) < n*total {
		panic(fmt.Sprintf("cuda: Attention mask of %d flags for %d rows of %d", len(mask), n, total))
	}
	need(qt, n*s.Heads*s.HeadDim, "Attention queries")
	need(ot, n*s.Heads*s.HeadDim, "Attention output")
	if n == 0 {
		return
	}
	l := d.launchOK(AttentionLaunch(c.t, s.Heads, s.KVHeads, s.HeadDim, n))
	if d.fp != nil {
		defer d.record()()
		o := op{kind: opAttention, out: ot.ptr, x: qt.ptr, kv: c, layer: layer, n: n, attn: s,
			item: d.fp.stageInts(tagPast, []int{past}), item2: -1}
		if mask != nil {
			m := mask[:n*total]
			o.item2 = d.fp.stageAs(sliceID(m), unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(m))), len(m)), true)
		}
		d.fp.add(o)
		return
	}
	defer d.enter()()
	var maskPtr cu.DevicePtr
	if mask != nil {
		// a []bool's bytes are 0 and 1 (cgo passes Go's bool as C's
		// _Bool), and the kernel reads a nonzero byte as visible: the
		// mask goes up as it is, rather than converted into a new byte
		// slice at every layer, and the later layers of a pass find it in
		// place and copy nothing
		m := mask[:n*total]
		maskPtr = d.uploadTo(sMask, unsafe.Pointer(unsafe.SliceData(m)), int64(len(m)))
	}
	d.launch(l, ptr(ot.ptr), ptr(qt.ptr), ptr(c.ptr), ptr(maskPtr), i32(layer), i32(c.slots), i32(past),
		i32(s.Heads), i32(s.KVHeads), i32(s.HeadDim), f32(s.Scale), f32(s.Softcap))
}

// Compact moves slot keep[i] to slot i on every layer.
func (d *Device) Compact(kv kernels.KV, keep []int, used int) error {
	c := kp(kv)
	if used > c.slots {
		return fmt.Errorf("cuda: Compact of %d used slots in a cache of %d", used, c.slots)
	}
	seen := make(map[int]bool, len(keep))
	for _, s := range keep {
		if s < 0 || s >= used || seen[s] {
			return fmt.Errorf("cuda: Compact: slot %d is not a distinct slot below %d", s, used)
		}
		seen[s] = true
	}
	// the slots already in place stay there: the kernels see the cache
	// from the first slot that moves (every plane shifted alike, as the
	// planes keep their stride of c.slots rows)
	off, tail := CompactTail(keep)
	if len(tail) == 0 {
		return nil
	}
	ls, sb, err := CompactLaunches(c.t, c.layers, c.width, len(tail))
	if err != nil {
		return err
	}
	if d.fp != nil {
		defer d.record()()
		d.fp.add(op{kind: opCompact, kv: c, rows: off, n: len(tail), item: d.fp.stageIntsAs(0, tail, true)})
		return nil
	}
	defer d.enter()()
	keepPtr := d.uploadInts(sIdx, tail)
	sp := d.scratch(sCompact, sb)
	words := c.width * c.es / 2
	base := c.ptr + cu.DevicePtr(int64(off)*int64(c.width*c.es))
	d.launch(ls[0], ptr(sp), ptr(base), ptr(keepPtr), i32(len(tail)), i32(c.slots), i32(words))
	d.launch(ls[1], ptr(base), ptr(sp), i32(len(tail)), i32(c.slots), i32(words))
	return nil
}

// CopyKV copies the first n slots of every layer of src into dst.
func (d *Device) CopyKV(dst, src kernels.KV, n int) error {
	a, b := kp(dst), kp(src)
	if a.layers != b.layers || a.width != b.width || a.t != b.t {
		return fmt.Errorf("cuda: CopyKV between caches of different shapes")
	}
	if n < 0 || n > a.slots || n > b.slots {
		return fmt.Errorf("cuda: CopyKV of %d slots between caches of %d and %d", n, b.slots, a.slots)
	}
	if n == 0 || a == b {
		return nil
	}
	if d.fp != nil {
		defer d.record()()
		d.fp.add(op{kind: opCopyKV, kv: a, kv2: b, n: n})
		return nil
	}
	defer d.enter()()
	row := int64(a.width * a.es)
	dstPlane, srcPlane := int64(a.slots)*row, int64(b.slots)*row // the caches may differ in capacity
	for p := int64(0); p < 2*int64(a.layers); p++ {
		if err := cu.MemcpyDtoD(a.ptr+cu.DevicePtr(p*dstPlane), b.ptr+cu.DevicePtr(p*srcPlane), int64(n)*row); err != nil {
			return fmt.Errorf("cuda: CopyKV: %w", err)
		}
	}
	return nil
}

var (
	_ kernels.Device      = (*Device)(nil)
	_ kernels.MemoryMeter = (*Device)(nil)
	_ kernels.MultiMatMul = (*Device)(nil)
)

// MeasureMemory times a 256 MiB copy inside device memory and 64 MiB
// transfers each way (medians of several, after a warm-up), and reads the
// memory's clock and bus width and the multiprocessor count.
func (d *Device) MeasureMemory() (kernels.MemoryRates, error) {
	const size, hostSize = 256 << 20, 64 << 20
	r := kernels.MemoryRates{Description: d.desc}
	var err error
	if r.Multiprocessors, err = d.dev.Attribute(cu.MultiprocessorCount); err != nil {
		return r, fmt.Errorf("cuda: multiprocessor count: %w", err)
	}
	clock, err1 := d.dev.Attribute(cu.MemoryClockRate) // kHz
	bus, err2 := d.dev.Attribute(cu.GlobalMemoryBusWidth)
	if err1 == nil && err2 == nil {
		r.Peak = 2 * float64(clock) * 1e3 * float64(bus) / 8 // two transfers a clock
	}
	if d.fp != nil {
		d.mu.Lock()
		d.flush()
		d.mu.Unlock()
	}
	defer d.enter()()
	a, err := d.alloc("the bandwidth test", size)
	if err != nil {
		return r, err
	}
	defer d.free(a)
	b, err := d.alloc("the bandwidth test", size)
	if err != nil {
		return r, err
	}
	defer d.free(b)
	host := make([]byte, hostSize)
	median := func(reps int, op func() error) (time.Duration, error) {
		var ts []time.Duration
		for i := 0; i <= reps; i++ { // the first is a warm-up
			if err := cu.Synchronize(); err != nil {
				return 0, err
			}
			t0 := time.Now()
			if err := op(); err != nil {
				return 0, err
			}
			if err := cu.Synchronize(); err != nil {
				return 0, err
			}
			if i > 0 {
				ts = append(ts, time.Since(t0))
			}
		}
		slices.Sort(ts)
		return ts[len(ts)/2], nil
	}
	t, err := median(21, func() error { return cu.MemcpyDtoD(b, a, size) })
	if err != nil {
		return r, fmt.Errorf("cuda: timing a copy: %w", err)
	}
	r.Copy = 2 * size / t.Seconds()
	if t, err = median(7, func() error { return cu.MemcpyHtoD(a, unsafe.Pointer(&host[0]), hostSize) }); err != nil {
		return r, fmt.Errorf("cuda: timing a transfer to the device: %w", err)
	}
	r.HostToDevice = hostSize / t.Seconds()
	if t, err = median(7, func() error { return cu.MemcpyDtoH(unsafe.Pointer(&host[0]), a, hostSize) }); err != nil {
		return r, fmt.Errorf("cuda: timing a transfer to the host: %w", err)
	}
	r.DeviceToHost = hostSize / t.Seconds()
	return r, nil
}
