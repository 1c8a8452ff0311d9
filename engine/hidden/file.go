package hidden

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"arborist/engine/gguf"
	"arborist/kernels/quant"
)

// Arch is the general.architecture of a drafter file.
const Arch = "arborist-hidden-drafter"

// ErrNotDrafter reports a GGUF file that is not a hidden-state drafter.
var ErrNotDrafter = errors.New("hidden: not a hidden-state drafter file")

// State is resumable training state: the Adam moments and where training
// stopped. A drafter carries it while training is unfinished.
type State struct {
	Epoch int // epochs completed
	Step  int // Adam updates made
	M, V  []float32
}

// Encode writes the drafter (and its training state, when set) as GGUF.
func (d *Drafter) Encode(w io.Writer, st *State) error {
	settings, err := json.Marshal(d.Settings)
	if err != nil {
		return err
	}
	losses, err := json.Marshal(d.Losses)
	if err != nil {
		return err
	}
	hot := make([]int32, len(d.Hot))
	for i, t := range d.Hot {
		hot[i] = int32(t)
	}
	k := func(s string) string { return "hidden." + s }
	kvs := []gguf.KV{
		gguf.String("general.architecture", Arch),
		gguf.String("general.name", "hidden-state drafter"),
		gguf.Uint32(k("embedding_length"), uint32(d.Dim)),
		gguf.Uint32(k("attention.head_count"), uint32(d.Heads)),
		gguf.Uint32(k("attention.head_count_kv"), uint32(d.KVHeads)),
		gguf.Uint32(k("attention.key_length"), uint32(d.HeadDim)),
		gguf.Uint32(k("feed_forward_length"), uint32(d.FFN)),
		gguf.Uint32(k("vocab_size"), uint32(d.Vocab)),
		gguf.Uint32(k("token_info_rank"), uint32(d.D)),
		gguf.Uint32(k("rope.dimension_count"), uint32(d.RopeDim)),
		gguf.Float32(k("rope.freq_base"), d.RopeBase),
		gguf.Float32(k("rope.scale_linear"), d.RopeScale),
		gguf.Bool(k("rope.neox"), d.RopeNeox),
		gguf.Float32(k("attention.layer_norm_rms_epsilon"), d.Eps),
		gguf.Int32(k("init_layer"), int32(d.InitLayer)),
		gguf.String(k("target"), d.Target),
		gguf.String(k("target_fingerprint"), d.Fingerprint),
		gguf.String(k("settings"), string(settings)),
		gguf.String(k("losses"), string(losses)),
		gguf.Array(k("hot_tokens"), hot),
	}
	var ts []gguf.WriteTensor
	add := func(prefix string, p []float32) {
		for _, b := range d.Layout() {
			dims := []uint64{uint64(b.Cols), uint64(b.Rows)}
			if b.Rows == 1 {
				dims = dims[:1]
			}
			ts = append(ts, gguf.WriteTensor{Name: prefix + b.Name, Dims: dims, Type: quant.F32, Data: f32Bytes(p[b.Off : b.Off+b.Size()])})
		}
	}
	add("", d.P)
	if st != nil {
		kvs = append(kvs, gguf.Uint32(k("train.epoch"), uint32(st.Epoch)), gguf.Uint32(k("train.step"), uint32(st.Step)))
		add("adam.m.", st.M)
		add("adam.v.", st.V)
	}
	return gguf.Write(w, kvs, ts)
}

// Save writes the drafter to path atomically.
func (d *Drafter) Save(path string, st *State) error {
	return gguf.WriteFileFunc(path, func(w io.Writer) error { return d.Encode(w, st) })
}

// Bytes encodes the drafter in memory.
func (d *Drafter) Bytes(st *State) ([]byte, error) {
	var b bytes.Buffer
	if err := d.Encode(&b, st); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Load reads a drafter file: a regular file whose header, read first,
// accounts for its size (gguf.ReadDeclared), so a sparse file of
// gigabytes or a header with a hole after it is refused unread.
func Load(path string) (*Drafter, *State, error) {
	data, err := gguf.ReadDeclared(path)
	if err != nil {
		return nil, nil, fmt.Errorf("hidden: %w", err)
	}
	return Decode(path, data)
}

// Decode parses a drafter from GGUF bytes; name labels errors. The State is
// nil unless the file carries unfinished training.
func Decode(name string, data []byte) (*Drafter, *State, error) {
	f, err := gguf.Parse(name, data)
	if err != nil {
		return nil, nil, err
	}
	if a := f.Architecture(); a != Arch {
		return nil, nil, fmt.Errorf("%s: %w (architecture %q)", name, ErrNotDrafter, a)
	}
	var bad error
	u := func(key string) int {
		v, ok := f.Uint("hidden." + key)
		if !ok && bad == nil {
			bad = fmt.Errorf("%s: %w: missing hidden.%s", name, gguf.ErrMetadata, key)
		}
		if v > 1<<24 && bad == nil {
			bad = fmt.Errorf("%s: %w: hidden.%s = %d is implausible", name, gguf.ErrMetadata, key, v)
		}
		return int(v)
	}
	fl := func(key string) float32 {
		v, ok := f.Float("hidden." + key)
		if !ok && bad == nil {
			bad = fmt.Errorf("%s: %w: missing hidden.%s", name, gguf.ErrMetadata, key)
		}
		return float32(v)
	}
	s := Shape{Dim: u("embedding_length"), Heads: u("attention.head_count"), KVHeads: u("attention.head_count_kv"),
		HeadDim: u("attention.key_length"), FFN: u("feed_forward_length"), Vocab: u("vocab_size"), D: u("token_info_rank"),
		RopeDim: u("rope.dimension_count"), RopeBase: fl("rope.freq_base"), RopeScale: fl("rope.scale_linear"),
		Eps: fl("attention.layer_norm_rms_epsilon")}
	s.RopeNeox, _ = f.Bool("hidden.rope.neox")
	if bad != nil {
		return nil, nil, bad
	}
	if s.Dim == 0 || s.Heads == 0 || s.KVHeads == 0 || s.HeadDim == 0 || s.FFN == 0 || s.Vocab == 0 || s.D == 0 ||
		s.Heads%s.KVHeads != 0 || s.RopeDim > s.HeadDim || s.RopeDim%2 != 0 || !finitePositive(s.RopeScale) ||
		!finitePositive(s.RopeBase) || !finitePositive(s.Eps) {
		return nil, nil, fmt.Errorf("%s: %w: inconsistent shape %+v", name, gguf.ErrMetadata, s)
	}
	// every tensor must be in the file with the shape's dimensions before
	// anything is allocated: a damaged header cannot ask for gigabytes
	tensors := func(prefix string) ([][]byte, error) {
		var out [][]byte
		for _, b := range s.Layout() {
			dims := []uint64{uint64(b.Cols), uint64(b.Rows)}
			if b.Rows == 1 {
				dims = dims[:1]
			}
			t, data, err := f.TensorData(prefix+b.Name, dims...)
			if err != nil {
				return nil, err
			}
			if t.Type != quant.F32 {
				return nil, fmt.Errorf("%s: %w: %s is %s, want F32", name, gguf.ErrShape, t.Name, t.Type)
			}
			out = append(out, data)
		}
		return out, nil
	}
	weights, err := tensors("")
	if err != nil {
		return nil, nil, err
	}
	d := &Drafter{Shape: s, P: make([]float32, s.Params())}
	d.Target, _ = f.String("hidden.target")
	d.Fingerprint, _ = f.String("hidden.target_fingerprint")
	if kv, ok := f.Get("hidden.init_layer"); ok {
		if v, ok := kv.Value.(int32); ok {
			d.InitLayer = int(v)
		}
	}
	if js, ok := f.String("hidden.settings"); ok {
		if err := json.Unmarshal([]byte(js), &d.Settings); err != nil {
			return nil, nil, fmt.Errorf("%s: %w: hidden.settings: %v", name, gguf.ErrMetadata, err)
		}
	}
	if js, ok := f.String("hidden.losses"); ok && js != "null" {
		if err := json.Unmarshal([]byte(js), &d.Losses); err != nil {
			return nil, nil, fmt.Errorf("%s: %w: hidden.losses: %v", name, gguf.ErrMetadata, err)
		}
	}
	if kv, ok := f.Get("hidden.hot_tokens"); ok {
		hot, ok := kv.Value.([]int32)
		if !ok {
			return nil, nil, fmt.Errorf("%s: %w: hidden.hot_tokens is not an int32 array", name, gguf.ErrMetadata)
		}
		for _, t := range hot {
			if t < 0 || int(t) >= s.Vocab {
				return nil, nil, fmt.Errorf("%s: %w: hot token %d outside the vocabulary of %d", name, gguf.ErrMetadata, t, s.Vocab)
			}
			d.Hot = append(d.Hot, int(t))
		}
	}
	read := func(blocks [][]byte, p []float32) {
		for i, b := range d.Layout() {
			for j := range b.Size() {
				p[b.Off+j] = math.Float32frombits(binary.LittleEndian.Uint32(blocks[i][4*j:]))
			}
		}
	}
	read(weights, d.P)
	var st *State
	if ep, ok := f.Uint("hidden.train.epoch"); ok {
		step, _ := f.Uint("hidden.train.step")
		m, err := tensors("adam.m.")
		if err != nil {
			return nil, nil, err
		}
		v, err := tensors("adam.v.")
		if err != nil {
			return nil, nil, err
		}
		st = &State{Epoch: int(ep), Step: int(step), M: make([]float32, len(d.P)), V: make([]float32, len(d.P))}
		read(m, st.M)
		read(v, st.V)
	}
	return d, st, nil
}

func f32Bytes(p []float32) []byte {
	b := make([]byte, 4*len(p))
	for i, v := range p {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// finitePositive says whether v is a number a shape can hold as a scale,
// base or epsilon (a NaN epsilon decoded silently gave 0% acceptance).
func finitePositive(v float32) bool { return v > 0 && !math.IsInf(float64(v), 0) }
