package pairs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"arborist/engine/gguf"
	"arborist/engine/model"
	"arborist/profiles/store"
)

// openModelFile opens path only if it is a regular file, without blocking
// on a FIFO.
func openModelFile(path string) (*os.File, os.FileInfo, error) {
	f, st, err := gguf.OpenRegular(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, st, nil
}

// ModelSHA256 is the SHA-256 of a model file, hex. It reads the whole file
// once (seconds per gigabyte) and caches the result in st (when not nil),
// keyed by the absolute path and the file's size, modification time, inode
// and status-change time, so later calls on an unchanged file cost one
// stat and a same-size rewrite with its modification time restored is
// hashed again. ctx cancels a long hash.
func ModelSHA256(ctx context.Context, st *store.Store, path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	f, info, err := openModelFile(abs)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if st != nil {
		if h, err := st.FileHash(ctx, abs, info); err != nil || h != "" {
			return h, err
		}
	}
	h := sha256.New()
	buf := make([]byte, 4<<20)
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, rerr := f.Read(buf)
		h.Write(buf[:n])
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return "", fmt.Errorf("hashing %s: %w", path, rerr)
		}
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if st != nil && !st.ReadOnly() {
		if err := st.PutFileHash(ctx, abs, info, sum); err != nil {
			return "", err
		}
	}
	return sum, nil
}

// quickFingerprint is the fingerprint Arborist stored before config files
// carried a real SHA-256 (and still uses to key models in the database): a
// SHA-256 of the size and the first and last MiB, 24 hex digits.
func quickFingerprint(f *os.File, size int64) string {
	hsh := sha256.New()
	fmt.Fprintf(hsh, "%d|", size)
	f.Seek(0, io.SeekStart)
	io.CopyN(hsh, f, 1<<20)
	if size > 2<<20 {
		f.Seek(-1<<20, io.SeekEnd)
		io.CopyN(hsh, f, 1<<20)
	}
	return hex.EncodeToString(hsh.Sum(nil)[:12])
}

// DescribeModel fingerprints a loaded model: a hash of its size and its first
// and last MiB (cheap on multi-gigabyte files), with shape and vocabulary.
func DescribeModel(m *model.Model) (store.Model, error) {
	f, err := os.Open(m.Path)
	if err != nil {
		return store.Model{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return store.Model{}, err
	}
	vh := sha256.New()
	for _, t := range m.Tok.Tokens {
		io.WriteString(vh, t)
		vh.Write([]byte{0})
	}
	quant := ""
	if tc := m.File.TypeCounts(); len(tc) > 0 {
		quant = tc[0].Type.String()
	}
	syn, _ := m.File.Bool("arborist.synthetic")
	return store.Model{
		Fingerprint: quickFingerprint(f, st.Size()),
		Path:        m.Path,
		Arch:        m.Arch,
		Shape:       fmt.Sprintf("dim %d, %d layers, %d/%d heads, ffn %d, vocab %d", m.Dim, m.Layers, m.Heads, m.KVHeads, m.FFN, m.Vocab),
		Quant:       quant,
		Params:      m.File.Params(),
		WeightBytes: m.WeightBytes(),
		VocabHash:   hex.EncodeToString(vh.Sum(nil)[:8]),
		Synthetic:   syn,
	}, nil
}

// FileFingerprint is the quick fingerprint DescribeModel records, of the
// model file at path: its size and first and last MiB.
func FileFingerprint(path string) (string, error) {
	f, info, err := openModelFile(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return quickFingerprint(f, info.Size()), nil
}
