//go:build cuda

package cuda

// The fast path (Path Fast, docs/CUDA.md): the Device's primitives are
// recorded, not launched, until the host asks for a result (Download,
// Argmax, or a call that must see the device's state); then the recorded
// pass is lowered to the fast kernels (fast.cuh), fusing what follows one
// another, its host inputs go up in one copy from page-locked memory, its
// launches run as a CUDA graph captured once per pass shape and replayed,
// and the wanted rows come home in one copy, with one wait. All of it on a
// non-blocking stream of its own.
//
// A graph replays its launches with the arguments they were captured
// with, so nothing a launch is given may change token after token: the
// values that do (the cache slot a pass stores to, the context length
// attention reads, token ids, RoPE tables, masks) live in the pass's
// staging buffer in device memory, each host input at an offset that
// stays put while it fits the room it has had (the room only grows), and
// the kernels read them there. The graphs are kept by their launches and
// arguments: a pass that issues the same ones replays its graph.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"arborist/kernels"
)

type opKind uint8

const (
	opEmbed     opKind = iota // out = rows item of emb
	opUpload                  // x = item's bytes
	opMatMul                  // outs[i] = ms[i] x, i < nm
	opRMSNorm                 // out = RMSNorm(x) w, rows x dim
	opAddRow                  // x += y per row, rows x dim
	opAdd                     // x += y, n values
	opScale                   // x *= f, n values
	opSoftcap                 // x = f tanh(x/f), n values
	opGLU                     // x = act(x) y, n values (flag: GELU)
	opRoPE                    // x rotated by items (cos, sin), n rows
	opStoreKV                 // kv layer's slots item.. = x, y, n rows
	opAttention               // out = attention(x, kv layer, past item, mask item2), n rows
	opGather                  // out[j] = x[item[j]], n rows of dim
	opArgmax                  // argmax scratch = argmax of x, rows x dim
	opCompact                 // kv from slot rows on: slot item[i] to slot i, n slots
	opCopyKV                  // kv = kv2, first n slots
)

// op is one recorded primitive; which fields it uses depends on its kind.
type op struct {
	kind         opKind
	out, x, y, w cu.DevicePtr
	outs         [3]cu.DevicePtr
	ms           [3]*matrix
	nm           int
	n, rows, dim int
	f            float32
	flag         bool
	item, item2  int // staged host inputs, -1 for none
	kv, kv2      *kvCache
	layer        int
	rope         kernels.RoPEShape
	attn         kernels.AttnShape
}

// staged is one host input of the pass: id names where it came from (so
// that the same table given twice goes up once), off and size place its
// bytes in fastState.host; grows marks an input whose size changes from
// pass to pass of one shape (a mask, a commit's slots).
type staged struct {
	id        uintptr
	off, size int
	grows     bool
}

// Tags of the staged scalars.
const (
	tagSlot uintptr = iota + 1
	tagPast
)

// entry is one step of a lowered pass: a launch (ls[li]), or a copy
// inside device memory.
type entry struct {
	copy     bool
	eager    bool // a launch whose arguments change pass after pass: never in a graph
	li       int
	dst, src cu.DevicePtr
	bytes    int64
}

// graphEntry is an instantiated graph and when it was last launched.
type graphEntry struct {
	exec graphExec
	used uint64
}

// maxGraphs bounds the graphs kept (a decode step, verification passes of
// the widths a strategy uses, their commits): the least recently launched
// goes first.
const maxGraphs = 64

// readBack is a read back: bytes bytes at src (or, when buf > 0, at
// scratch buffer buf-1, which the pass may grow) into dst, after the
// pass.
type readBack struct {
	dst   unsafe.Pointer
	src   cu.DevicePtr
	buf   int
	bytes int64
}

// flushArgmax issues the recorded pass, its last primitive an Argmax,
// and brings the argmax home into dst.
func (d *Device) flushArgmax(dst []int32) {
	d.flush(readBack{dst: unsafe.Pointer(&dst[0]), buf: sArg + 1, bytes: 4 * int64(len(dst))})
}

// fastState is a fast-path Device's own state.
type fastState struct {
	stream cu.Stream
	ops    []op
	host   []byte   // the pass's host inputs, back to back (aligned to 16)
	tmp    []byte   // ints being staged
	items  []staged // placed in host
	at     []int64  // per item: its offset in the device staging
	room   []int64  // per growing item (by rank): its room in the device staging, only ever grown
	dev    cu.DevicePtr
	devLen int64
	in     hostBuf // page-locked copy of the staging, uploaded in one copy
	out    hostBuf // page-locked, what a pass brings home

	// a lowered pass
	entries  []entry
	ls       []drvLaunch
	args     []uint64
	kernels  []string // per launch, for messages
	volatile bool     // a launch of the verified kernels whose scalars change: no graphs this pass
	key      []byte

	graphs   map[string]*graphEntry
	tick     uint64
	useGraph bool
	graphErr error // why graphs were given up, when they were
	pinned   bool
}

// hostBuf is a host buffer, page-locked where the driver offers it.
type hostBuf struct {
	p    unsafe.Pointer
	n    int
	keep []byte // the pageable fallback's memory
}

func (h *hostBuf) grow(n int, pinned bool) {
	if h.n >= n {
		return
	}
	n = max(n, 2*h.n, 1<<16)
	h.free(pinned)
	if pinned {
		p, err := hostAlloc(n)
		must(err)
		h.p, h.n = p, n
		return
	}
	h.keep = make([]byte, n)
	h.p, h.n = unsafe.Pointer(&h.keep[0]), n
}

func (h *hostBuf) free(pinned bool) {
	if h.p != nil && pinned {
		hostFree(h.p)
	}
	*h = hostBuf{}
}

func (h *hostBuf) bytes(off, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(h.p, off)), n)
}

// newFast makes the fast path's stream; the caller holds the context.
func newFast() (*fastState, error) {
	loadDrv()
	s, err := cu.MakeStream(cu.NonBlocking)
	if err != nil {
		return nil, fmt.Errorf("cuda: creating the fast path's stream: %w", err)
	}
	return &fastState{stream: s, graphs: map[string]*graphEntry{}, useGraph: drv.graphs, pinned: drv.locks}, nil
}

// describe says how the fast path runs here.
func (fs *fastState) describe() string {
	s := "fast path"
	switch {
	case fs.useGraph:
		s += ", CUDA graphs"
	case fs.graphErr != nil:
		s += fmt.Sprintf(", no CUDA graphs (%v)", fs.graphErr)
	default:
		s += ", no CUDA graphs (the driver lacks the capture calls)"
	}
	if !fs.pinned {
		s += ", pageable staging (the driver lacks cuMemHostAlloc)"
	}
	return s
}

// close releases the graphs, the page-locked buffers and the stream; the
// caller holds the context.
func (fs *fastState) close() {
	for _, g := range fs.graphs {
		destroyGraph(g.exec)
	}
	fs.graphs = nil
	fs.in.free(fs.pinned)
	fs.out.free(fs.pinned)
	fs.stream.Destroy()
}

// ------------------------------------------------------------ recording

// record takes the device's lock for a recorded primitive.
func (d *Device) record() func() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		panic("cuda: device used after Close")
	}
	return d.mu.Unlock
}

func (fs *fastState) add(o op) { fs.ops = append(fs.ops, o) }

// stage adds b to the pass's host inputs and returns its index; an input
// of the same id and bytes as one already staged this pass is that one.
func (fs *fastState) stage(id uintptr, b []byte) int { return fs.stageAs(id, b, false) }

// stageAs is stage, for an input whose size changes from pass to pass
// when grows is set.
func (fs *fastState) stageAs(id uintptr, b []byte, grows bool) int {
	if id != 0 {
		for i, it := range fs.items {
			if it.id == id && bytes.Equal(fs.host[it.off:it.off+it.size], b) {
				return i
			}
		}
	}
	off := (len(fs.host) + 15) &^ 15
	for len(fs.host) < off {
		fs.host = append(fs.host, 0)
	}
	fs.host = append(fs.host, b...)
	fs.items = append(fs.items, staged{id: id, off: off, size: len(b), grows: grows})
	return len(fs.items) - 1
}

func (fs *fastState) stageInts(id uintptr, v []int) int { return fs.stageIntsAs(id, v, false) }

func (fs *fastState) stageIntsAs(id uintptr, v []int, grows bool) int {
	fs.tmp = fs.tmp[:0]
	for _, x := range v {
		fs.tmp = binary.LittleEndian.AppendUint32(fs.tmp, uint32(int32(x)))
	}
	return fs.stageAs(id, fs.tmp, grows)
}

func (fs *fastState) stageFloats(id uintptr, v []float32) int {
	return fs.stage(id, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v)))
}

func sliceID[T any](v []T) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(v))) }

// ------------------------------------------------------------- the pass

// flush issues the recorded pass and then the read backs, and waits for
// them: the fast path's one wait. The caller holds d.mu.
func (d *Device) flush(dls ...readBack) {
	fs := d.fp
	if len(fs.ops) == 0 && len(dls) == 0 {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	must(cu.SetCurrentContext(d.ctx))
	defer func() {
		fs.ops, fs.host, fs.items = fs.ops[:0], fs.host[:0], fs.items[:0]
	}()
	d.prepare()
	d.upload()
	d.lower()
	d.issue()
	total, direct := 0, false
	for _, dl := range dls {
		total += int(dl.bytes+15) &^ 15
		direct = direct || dl.bytes > directReadBack
	}
	if direct {
		// many rows of logits: straight into the caller's memory, which
		// the driver pipelines through its own page-locked buffers (a
		// copy to pageable memory returns when it is done, after the
		// launches before it), rather than a copy into ours and another
		// out of it
		for _, dl := range dls {
			must(cu.MemcpyDtoHAsync(dl.dst, d.readSrc(dl), dl.bytes, fs.stream))
		}
		if len(dls) == 0 {
			must(fs.stream.Synchronize())
		}
		return
	}
	fs.out.grow(total, fs.pinned)
	off := 0
	for _, dl := range dls {
		if dl.bytes > 0 {
			must(cu.MemcpyDtoHAsync(unsafe.Add(fs.out.p, off), d.readSrc(dl), dl.bytes, fs.stream))
		}
		off += int(dl.bytes+15) &^ 15
	}
	must(fs.stream.Synchronize())
	off = 0
	for _, dl := range dls {
		copy(unsafe.Slice((*byte)(dl.dst), dl.bytes), fs.out.bytes(off, int(dl.bytes)))
		off += int(dl.bytes+15) &^ 15
	}
}

// directReadBack is the size above which a read back goes straight to the
// caller's memory (a few rows of logits of a large vocabulary), not
// through the page-locked buffer.
const directReadBack = 1 << 20

// readSrc is where a read back reads.
func (d *Device) readSrc(dl readBack) cu.DevicePtr {
	if dl.buf > 0 {
		return d.buf[dl.buf-1].ptr
	}
	return dl.src
}

// prepare makes what the lowered pass needs before any of it is issued:
// matrices multiplied together stored as one, and scratch buffers large
// enough (growing one waits for the device, once).
func (d *Device) prepare() {
	fs := d.fp
	var q8, arg, compact int64
	for i := range fs.ops {
		o := &fs.ops[i]
		switch o.kind {
		case opMatMul:
			if o.nm > 1 {
				d.fuse(o.ms[:o.nm])
			}
			for _, m := range o.ms[:o.nm] {
				if quantised(m.t) {
					q8 = max(q8, int64(o.n)*int64(m.cols)+8*int64(o.n)*int64(m.cols/32))
				}
			}
		case opArgmax:
			arg = max(arg, 4*int64(o.rows))
		case opCompact:
			_, sb, err := CompactLaunches(o.kv.t, o.kv.layers, o.kv.width, o.n)
			must(err)
			compact = max(compact, sb)
		}
	}
	if q8 > 0 {
		d.scratch(sQ8, q8)
	}
	if arg > 0 {
		d.scratch(sArg, arg)
	}
	if compact > 0 {
		d.scratch(sCompact, compact)
	}
}

// fuse stores matrices that one product multiplies together (Q, K, V;
// gate, up) one after another in one allocation, so that one launch
// covers them (f_mm_*'s outputs split by row). It is done once, at the
// first pass that multiplies them together; matrices of different types
// or widths, or that the fast products do not take, stay apart, as they
// do when the device lacks the memory for the move.
func (d *Device) fuse(ms []*matrix) {
	m0 := ms[0]
	if _, _, ok, _ := FastProductLaunch(m0.t, m0.rows, m0.cols, 1); !ok {
		return
	}
	var total int64
	for i, m := range ms {
		if m.t != m0.t || m.cols != m0.cols {
			return
		}
		if i > 0 && m.ptr != ms[i-1].ptr+cu.DevicePtr(int64(ms[i-1].rows)*int64(ms[i-1].rowBytes)) {
			total = -1 << 62
		}
		total += int64(m.rows) * int64(m.rowBytes)
	}
	if total >= 0 {
		return // already one after another
	}
	total = 0
	for _, m := range ms {
		total += int64(m.rows) * int64(m.rowBytes)
	}
	p, err := d.alloc(fmt.Sprintf("%d %v matrices stored together", len(ms), m0.t), total)
	if err != nil {
		return
	}
	fs := d.fp
	must(fs.stream.Synchronize())
	var off int64
	for _, m := range ms {
		b := int64(m.rows) * int64(m.rowBytes)
		must(cu.MemcpyDtoDAsync(p+cu.DevicePtr(off), m.ptr, b, fs.stream))
		off += b
	}
	must(fs.stream.Synchronize())
	off = 0
	for _, m := range ms {
		d.free(m.ptr)
		m.ptr = p + cu.DevicePtr(off)
		off += int64(m.rows) * int64(m.rowBytes)
	}
}

// upload places the pass's host inputs in the device staging buffer and
// copies them up in one copy. The inputs of fixed size come first, back to
// back, so that their places are the same pass after pass of one shape;
// then those that grow (a mask, a commit's slots), each in a room that
// only grows (doubling), so that their places change only when one
// outgrows its room: a kernel's arguments, which point into the buffer,
// stay the same, and its graph replays.
func (d *Device) upload() {
	fs := d.fp
	if len(fs.items) == 0 {
		return
	}
	fs.at = fs.at[:0]
	var fixed int64
	for _, it := range fs.items {
		if !it.grows {
			fixed += (int64(it.size) + 15) &^ 15
		}
	}
	var off, g, last int64 = 0, 0, 0
	grow := fixed
	for _, it := range fs.items {
		if !it.grows {
			fs.at = append(fs.at, off)
			last = max(last, off+int64(it.size))
			off += (int64(it.size) + 15) &^ 15
			continue
		}
		if int(g) == len(fs.room) {
			fs.room = append(fs.room, 0)
		}
		if r := fs.room[g]; int64(it.size) > r {
			fs.room[g] = (max(int64(it.size), 2*r, 256) + 255) &^ 255
		}
		fs.at = append(fs.at, grow)
		last = max(last, grow+int64(it.size))
		grow += fs.room[g]
		g++
	}
	if last > fs.devLen {
		size := max(last, 2*fs.devLen, 1<<16)
		if fs.dev != 0 {
			must(fs.stream.Synchronize()) // nothing in flight reads it: every pass ends waiting
			d.free(fs.dev)
		}
		p, err := d.alloc("the fast path's staging buffer", size)
		must(err)
		fs.dev, fs.devLen = p, size
	}
	fs.in.grow(int(last), fs.pinned)
	for i, it := range fs.items {
		copy(fs.in.bytes(int(fs.at[i]), it.size), fs.host[it.off:it.off+it.size])
	}
	must(cu.MemcpyHtoDAsync(fs.dev, fs.in.p, last, fs.stream))
}

// stagedAt is where item i is in device memory (0 for none).
func (d *Device) stagedAt(i int) cu.DevicePtr {
	if i < 0 {
		return 0
	}
	return d.fp.dev + cu.DevicePtr(d.fp.at[i])
}

// issue runs the lowered pass: runs of launches as graphs (captured the
// first time their launches and arguments are seen), the rest directly,
// in order.
func (d *Device) issue() {
	fs := d.fp
	graphs := fs.useGraph && !fs.volatile
	start := -1 // first launch of the pending run
	run := func(end int) {
		if start < 0 {
			return
		}
		d.runLaunches(start, end, graphs)
		start = -1
	}
	for _, e := range fs.entries {
		switch {
		case e.copy:
			run(e.li)
			if e.bytes > 0 {
				must(cu.MemcpyDtoDAsync(e.dst, e.src, e.bytes, fs.stream))
			}
		case e.eager:
			run(e.li)
			d.runLaunches(e.li, e.li+1, false)
		default:
			if start < 0 {
				start = e.li
			}
		}
	}
	run(len(fs.ls))
}

// runLaunches issues launches [a, b) of the lowered pass, as a graph when
// graph is set.
func (d *Device) runLaunches(a, b int, graph bool) {
	fs := d.fp
	if a >= b {
		return
	}
	ls := fs.ls[a:b]
	if !graph {
		if i, err := runLaunches(ls, fs.args, fs.stream); err != nil {
			panic(fmt.Sprintf("cuda: launching %s: %v", fs.kernels[a+i], err))
		}
		return
	}
	key := fs.key[:0]
	for i, l := range ls {
		key = append(key, fs.kernels[a+i]...)
		key = binary.LittleEndian.AppendUint32(key, uint32(l.g[0]))
		key = binary.LittleEndian.AppendUint32(key, uint32(l.g[1]))
		key = binary.LittleEndian.AppendUint32(key, uint32(l.g[2]))
		key = binary.LittleEndian.AppendUint32(key, uint32(l.b[0]))
		for _, v := range fs.args[l.off : l.off+l.nargs] {
			key = binary.LittleEndian.AppendUint64(key, v)
		}
	}
	fs.key = key
	fs.tick++
	g, ok := fs.graphs[string(key)]
	if !ok {
		x, err := captureLaunches(ls, fs.args, fs.stream)
		if err != nil {
			// a driver that refuses the capture runs the launches as
			// they are, from now on (Describe says why)
			fs.useGraph, fs.graphErr = false, err
			d.runLaunches(a, b, false)
			return
		}
		if len(fs.graphs) >= maxGraphs {
			var oldest string
			var at uint64 = 1<<64 - 1
			for k, v := range fs.graphs {
				if v.used < at {
					oldest, at = k, v.used
				}
			}
			destroyGraph(fs.graphs[oldest].exec)
			delete(fs.graphs, oldest)
		}
		g = &graphEntry{exec: x}
		fs.graphs[string(key)] = g
	}
	g.used = fs.tick
	if err := launchGraph(g.exec, fs.stream); err != nil {
		panic(fmt.Sprintf("cuda: launching a graph of %d launches: %v", len(ls), err))
	}
}

// ------------------------------------------------------------- lowering

// emit appends a launch of l with args to the lowered pass.
func (d *Device) emit(l Launch, eager bool, args ...uint64) {
	fs := d.fp
	f, ok := d.fn[l.Kernel]
	if !ok {
		panic(fmt.Sprintf("cuda: no kernel %s", l.Kernel))
	}
	fs.entries = append(fs.entries, entry{eager: eager, li: len(fs.ls)})
	fs.ls = append(fs.ls, newDrvLaunch(f, l, len(fs.args), len(args)))
	fs.args = append(fs.args, args...)
	fs.kernels = append(fs.kernels, l.Kernel)
}

func (d *Device) emitCopy(dst, src cu.DevicePtr, n int64) {
	fs := d.fp
	fs.entries = append(fs.entries, entry{copy: true, li: len(fs.ls), dst: dst, src: src, bytes: n})
}

// q8state records which tensor the quantised-activation scratch holds,
// quantised, so that the products after its producer skip quantize_q8.
type q8state struct {
	x       cu.DevicePtr
	n, cols int
}

// q8 is the quantised-activation scratch for n rows of cols: values,
// scales, scaled sums (quantize_q8's layout).
func (d *Device) q8(n, cols int) (xq, xd, xs cu.DevicePtr) {
	s := d.buf[sQ8].ptr
	xd = s + cu.DevicePtr(n*cols)
	return s, xd, xd + cu.DevicePtr(4*n*cols/32)
}

// lower turns the recorded pass into launches, fusing what the fast
// kernels do in one: each rule checks that the primitives it fuses are
// the ones it stands for (the same tensors, rows and widths), and a
// primitive no rule takes is launched as the verified path launches it.
func (d *Device) lower() {
	fs := d.fp
	fs.entries, fs.ls, fs.args, fs.kernels, fs.volatile = fs.entries[:0], fs.ls[:0], fs.args[:0], fs.kernels[:0], false
	ops := fs.ops
	var prep q8state
	for i := 0; i < len(ops); {
		o := &ops[i]
		next := func(k int) *op {
			if i+k < len(ops) {
				return &ops[i+k]
			}
			return nil
		}
		switch o.kind {
		case opAdd:
			if nx := next(1); nx != nil && nx.kind == opRMSNorm && nx.x == o.x && nx.rows*nx.dim == o.n && nx.out != o.y {
				prep = d.lowerNorm(ops, i+1, o.y, -1)
				i += 2
				continue
			}
			d.emit(d.launchOK(ElementwiseLaunch("add", o.n)), false, ptr(o.x), ptr(o.y), i32(o.n))
		case opGather:
			if nx := next(1); nx != nil && nx.kind == opRMSNorm && nx.x == o.out && nx.out == o.out && nx.rows == o.n && nx.dim == o.dim {
				// f_norm reads the gathered rows where they are
				fused := *nx
				fused.x = o.x
				ops[i+1] = fused
				prep = d.lowerNorm(ops, i+1, 0, o.item)
				i += 2
				continue
			}
			d.emit(d.launchOK(RowsLaunch("gather", o.n, o.dim)), false, ptr(o.out), ptr(o.x), ptr(d.stagedAt(o.item)), i32(o.dim))
		case opRMSNorm:
			if k := d.lowerRoPE(ops, i); k > 0 {
				i += k
				prep = q8state{}
				continue
			}
			prep = d.lowerNorm(ops, i, 0, -1)
			i++
			continue
		case opRoPE:
			if k := d.lowerRoPE(ops, i); k > 0 {
				i += k
				prep = q8state{}
				continue
			}
			cp := d.stagedAt(o.item)
			sp := d.stagedAt(o.item2)
			neox := 0
			if o.rope.Neox {
				neox = 1
			}
			d.emit(d.launchOK(RoPELaunch(o.n, o.rope.Heads, o.rope.RopeDim, o.rope.HeadDim)), false,
				ptr(o.x), ptr(cp), ptr(sp), i32(o.rope.Heads), i32(o.rope.HeadDim), i32(o.rope.RopeDim), i32(neox))
		case opMatMul:
			prep = d.lowerProduct(o, prep)
			i++
			continue
		case opGLU:
			if nx := next(1); nx != nil && nx.kind == opMatMul && nx.nm == 1 && nx.x == o.x && quantised(nx.ms[0].t) &&
				nx.ms[0].cols%32 == 0 && nx.n*nx.ms[0].cols == o.n {
				m := nx.ms[0]
				xq, xd, xs := d.q8(nx.n, m.cols)
				ge := 0
				if o.flag {
					ge = 1
				}
				d.emit(d.launchOK(FastGLULaunch(m.cols, nx.n)), false, ptr(o.x), ptr(o.y), ptr(xq), ptr(xd), ptr(xs), i32(m.cols), i32(ge))
				prep = q8state{x: o.x, n: nx.n, cols: m.cols}
				i++
				continue
			}
			ge := 0
			if o.flag {
				ge = 1
			}
			d.emit(d.launchOK(ElementwiseLaunch("glu", o.n)), false, ptr(o.x), ptr(o.y), i32(o.n), i32(ge))
		case opAttention:
			prep = d.lowerAttention(ops, i)
			i++
			continue
		case opEmbed:
			m := o.ms[0]
			l, err := EmbedLaunch(m.t, m.cols, o.n)
			must(err)
			idp := d.stagedAt(o.item)
			if quantised(m.t) {
				d.emit(l, false, ptr(o.out), ptr(m.ptr), uint64(m.rowBytes), ptr(idp), i32(m.cols))
			} else {
				d.emit(l, false, ptr(o.out), ptr(m.ptr), ptr(idp), i32(m.cols))
			}
		case opUpload:
			d.emitCopy(o.x, d.stagedAt(o.item), int64(fs.items[o.item].size))
		case opAddRow:
			d.emit(d.launchOK(ElementwiseLaunch("add_row", o.rows*o.dim)), false, ptr(o.x), ptr(o.y), i32(o.rows*o.dim), i32(o.dim))
		case opScale:
			d.emit(d.launchOK(ElementwiseLaunch("scale", o.n)), false, ptr(o.x), i32(o.n), f32(o.f))
		case opSoftcap:
			d.emit(d.launchOK(ElementwiseLaunch("softcap", o.n)), false, ptr(o.x), i32(o.n), f32(o.f))
		case opStoreKV:
			// alone (not after the RoPE it belongs to): the verified
			// kernel, whose slot argument changes token after token
			c := o.kv
			suf, _, _ := kvSuffix(c.t)
			slot := int(int32(binary.LittleEndian.Uint32(fs.host[fs.items[o.item].off:])))
			d.emit(d.launchOK(RowsLaunch("store_kv_"+suf, o.n, c.width)), false,
				ptr(c.ptr), ptr(o.x), ptr(o.y), i32(o.layer), i32(c.slots), i32(c.width), i32(slot))
			fs.volatile = true
		case opArgmax:
			d.emit(d.launchOK(RowLaunch("argmax", o.rows)), false, ptr(d.buf[sArg].ptr), ptr(o.x), i32(o.dim))
		case opCompact:
			c := o.kv
			ls, _, err := CompactLaunches(c.t, c.layers, c.width, o.n)
			must(err)
			sp := d.buf[sCompact].ptr
			words := c.width * c.es / 2
			base := c.ptr + cu.DevicePtr(int64(o.rows)*int64(c.width*c.es))
			keep := d.stagedAt(o.item)
			d.emit(ls[0], true, ptr(sp), ptr(base), ptr(keep), i32(o.n), i32(c.slots), i32(words))
			d.emit(ls[1], true, ptr(base), ptr(sp), i32(o.n), i32(c.slots), i32(words))
		case opCopyKV:
			a, b := o.kv, o.kv2
			row := int64(a.width * a.es)
			dstPlane, srcPlane := int64(a.slots)*row, int64(b.slots)*row
			for p := int64(0); p < 2*int64(a.layers); p++ {
				d.emitCopy(a.ptr+cu.DevicePtr(p*dstPlane), b.ptr+cu.DevicePtr(p*srcPlane), int64(o.n)*row)
			}
		default:
			panic(fmt.Sprintf("cuda: no lowering of op %d", o.kind))
		}
		prep = q8state{}
		i++
	}
}

// lowerNorm lowers the RMSNorm at ops[j] (after an Add of y into its
// input when y is set; of the rows staged at item, gathered from its
// input, when item >= 0) with f_norm, quantising its output when the next
// primitive is a product that reads it quantised.
func (d *Device) lowerNorm(ops []op, j int, y cu.DevicePtr, item int) q8state {
	o := &ops[j]
	var xq, xd, xs cu.DevicePtr
	var prep q8state
	if j+1 < len(ops) {
		nx := &ops[j+1]
		if nx.kind == opMatMul && nx.x == o.out && nx.n == o.rows && o.dim%32 == 0 && allQuantised(nx) && nx.ms[0].cols == o.dim {
			xq, xd, xs = d.q8(o.rows, o.dim)
			prep = q8state{x: o.out, n: o.rows, cols: o.dim}
		}
	}
	d.emit(d.launchOK(FastNormLaunch(o.rows)), false, ptr(o.out), ptr(o.x), ptr(y), ptr(o.w), ptr(d.stagedAt(item)),
		ptr(xq), ptr(xd), ptr(xs), i32(o.dim), f32(o.f))
	return prep
}

func allQuantised(o *op) bool {
	for _, m := range o.ms[:o.nm] {
		if !quantised(m.t) || m.cols != o.ms[0].cols {
			return false
		}
	}
	return true
}

// lowerProduct lowers a product: the fast product for each run of its
// matrices stored one after another (one launch for Q|K|V once fused),
// its input quantised first unless prep says the scratch holds it so;
// types the fast products do not take go to the verified kernels.
func (d *Device) lowerProduct(o *op, prep q8state) q8state {
	for a := 0; a < o.nm; {
		m0 := o.ms[a]
		b := a + 1
		rows := m0.rows
		for b < o.nm && o.ms[b].t == m0.t && o.ms[b].cols == m0.cols &&
			o.ms[b].ptr == o.ms[b-1].ptr+cu.DevicePtr(int64(o.ms[b-1].rows)*int64(o.ms[b-1].rowBytes)) {
			rows += o.ms[b].rows
			b++
		}
		l, q8, ok, err := FastProductLaunch(m0.t, rows, m0.cols, o.n)
		must(err)
		if !ok {
			for k := a; k < b; k++ {
				d.lowerVerifiedProduct(o.outs[k], o.ms[k], o.x, o.n)
			}
			prep = q8state{}
			a = b
			continue
		}
		var outs [3]cu.DevicePtr
		b1, b2 := rows, rows
		copy(outs[:], o.outs[a:b])
		if b-a > 1 {
			b1 = o.ms[a].rows
		}
		if b-a > 2 {
			b2 = b1 + o.ms[a+1].rows
		}
		if q8 {
			xq, xd, xs := d.q8(o.n, m0.cols)
			if prep != (q8state{x: o.x, n: o.n, cols: m0.cols}) {
				d.emit(d.launchOK(launch("quantize_q8", m0.cols/32, o.n, 1, warp)), false, ptr(xq), ptr(xd), ptr(xs), ptr(o.x), i32(m0.cols))
				prep = q8state{x: o.x, n: o.n, cols: m0.cols}
			}
			d.emit(l, false, ptr(outs[0]), ptr(outs[1]), ptr(outs[2]), i32(b1), i32(b2), ptr(m0.ptr), uint64(m0.rowBytes),
				ptr(xq), ptr(xd), ptr(xs), i32(rows), i32(m0.cols), i32(o.n))
		} else {
			d.emit(l, false, ptr(outs[0]), ptr(outs[1]), ptr(outs[2]), i32(b1), i32(b2), ptr(m0.ptr), ptr(o.x),
				i32(rows), i32(m0.cols), i32(o.n))
		}
		a = b
	}
	for _, out := range o.outs[:o.nm] {
		if out == prep.x {
			prep = q8state{}
		}
	}
	return prep
}

// lowerVerifiedProduct is the verified path's product (matmul) on the
// fast path's stream, for a type the fast products do not take.
func (d *Device) lowerVerifiedProduct(out cu.DevicePtr, m *matrix, x cu.DevicePtr, n int) {
	p, err := PlanMatMul(m.t, m.rows, m.cols, n)
	must(err)
	mm := p.Launches[len(p.Launches)-1]
	switch {
	case p.Quantised:
		xq, xd, xs := d.q8(n, m.cols)
		d.emit(p.Launches[0], false, ptr(xq), ptr(xd), ptr(xs), ptr(x), i32(m.cols))
		d.emit(mm, false, ptr(out), ptr(m.ptr), uint64(m.rowBytes), ptr(xq), ptr(xd), ptr(xs), i32(m.rows), i32(m.cols), i32(n))
	case p.TensorCores:
		panic("cuda: the fast path's F16 products take every width a tensor-core product does")
	default:
		d.emit(mm, false, ptr(out), ptr(m.ptr), ptr(x), i32(m.rows), i32(m.cols), i32(n))
	}
}

// lowerRoPE lowers, from ops[i], [RMSNorm of Q's heads, RMSNorm of K's
// heads,] RoPE of Q, RoPE of K and the store of K and V into the cache,
// as the model issues them, with one f_rope_*; it returns how many
// primitives that took, 0 when they are not that sequence.
func (d *Device) lowerRoPE(ops []op, i int) int {
	j := i
	var qn, kn *op
	if j+1 < len(ops) && ops[j].kind == opRMSNorm && ops[j+1].kind == opRMSNorm {
		qn, kn = &ops[j], &ops[j+1]
		j += 2
	}
	if j+2 >= len(ops) || ops[j].kind != opRoPE || ops[j+1].kind != opRoPE || ops[j+2].kind != opStoreKV {
		return 0
	}
	rq, rk, st := &ops[j], &ops[j+1], &ops[j+2]
	n := rq.n
	hd := rq.rope.HeadDim
	c := st.kv
	switch {
	case rk.n != n || st.n != n || rk.rope.HeadDim != hd || rk.rope.RopeDim != rq.rope.RopeDim || rk.rope.Neox != rq.rope.Neox,
		rq.item != rk.item || rq.item2 != rk.item2, // the same tables
		st.x != rk.x || rq.x == rk.x || st.y == rk.x || st.y == rq.x,
		c.width != rk.rope.Heads*hd:
		return 0
	}
	if qn != nil {
		switch {
		case qn.out != rq.x || qn.x != rq.x || qn.rows != n*rq.rope.Heads || qn.dim != hd,
			kn.out != rk.x || kn.x != rk.x || kn.rows != n*rk.rope.Heads || kn.dim != hd || kn.f != qn.f:
			return 0
		}
	}
	var qw, kw cu.DevicePtr
	var eps float32
	if qn != nil {
		qw, kw, eps = qn.w, kn.w, qn.f
	}
	neox := 0
	if rq.rope.Neox {
		neox = 1
	}
	d.emit(d.launchOK(FastRoPELaunch(c.t, n)), false, ptr(c.ptr), ptr(rq.x), ptr(rk.x), ptr(st.y), ptr(qw), ptr(kw), f32(eps),
		ptr(d.stagedAt(rq.item)), ptr(d.stagedAt(rq.item2)), ptr(d.stagedAt(st.item)), i32(st.layer), i32(c.slots),
		i32(rq.rope.Heads), i32(rk.rope.Heads), i32(hd), i32(rq.rope.RopeDim), i32(neox))
	return j + 3 - i
}

// lowerAttention lowers an Attention with f_att_* (or the verified
// kernel, for a shape it does not take), quantising its output when the
// next primitive is a quantised product that reads it.
func (d *Device) lowerAttention(ops []op, i int) q8state {
	o := &ops[i]
	fs := d.fp
	c, s := o.kv, o.attn
	l, ok, err := FastAttentionLaunch(c.t, s.Heads, s.KVHeads, s.HeadDim, o.n)
	must(err)
	if !ok {
		al := d.launchOK(AttentionLaunch(c.t, s.Heads, s.KVHeads, s.HeadDim, o.n))
		past := int(int32(binary.LittleEndian.Uint32(fs.host[fs.items[o.item].off:])))
		d.emit(al, false, ptr(o.out), ptr(o.x), ptr(c.ptr), ptr(d.stagedAt(o.item2)), i32(o.layer), i32(c.slots), i32(past),
			i32(s.Heads), i32(s.KVHeads), i32(s.HeadDim), f32(s.Scale), f32(s.Softcap))
		fs.volatile = true
		return q8state{}
	}
	var xq, xd, xs cu.DevicePtr
	var prep q8state
	qd := s.Heads * s.HeadDim
	if i+1 < len(ops) {
		nx := &ops[i+1]
		if nx.kind == opMatMul && nx.nm == 1 && nx.x == o.out && nx.n == o.n && quantised(nx.ms[0].t) && nx.ms[0].cols == qd && s.HeadDim%32 == 0 {
			xq, xd, xs = d.q8(o.n, qd)
			prep = q8state{x: o.out, n: o.n, cols: qd}
		}
	}
	d.emit(l, false, ptr(o.out), ptr(o.x), ptr(c.ptr), ptr(d.stagedAt(o.item2)), ptr(d.stagedAt(o.item)), i32(o.layer), i32(c.slots),
		i32(s.Heads), i32(s.KVHeads), i32(s.HeadDim), f32(s.Scale), f32(s.Softcap), ptr(xq), ptr(xd), ptr(xs))
	return prep
}
