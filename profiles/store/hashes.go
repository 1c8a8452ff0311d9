package store

import (
	"context"
	"database/sql"
	"os"
)

// FileHash returns the SHA-256 cached for path when the file (st, its
// stat) is still the one hashed: the same size, modification time, inode
// and status-change time (stampOf); "" when there is none.
func (s *Store) FileHash(ctx context.Context, path string, st os.FileInfo) (string, error) {
	var h string
	err := s.db.QueryRowContext(ctx, "SELECT sha256 FROM file_hashes WHERE path = ? AND size = ? AND mtime_ns = ? AND stamp = ?",
		path, st.Size(), st.ModTime().UnixNano(), stampOf(st)).Scan(&h)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return h, s.wrap0("read file hash", err)
}

// PutFileHash caches path's SHA-256 for the file st describes.
func (s *Store) PutFileHash(ctx context.Context, path string, st os.FileInfo, sha string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO file_hashes(path, size, mtime_ns, stamp, sha256, created) VALUES (?,?,?,?,?,?)
		ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, stamp = excluded.stamp, sha256 = excluded.sha256, created = excluded.created`,
		path, st.Size(), st.ModTime().UnixNano(), stampOf(st), sha, now())
	return s.wrap0("save file hash", err)
}

// ReadOnly says whether the store was opened with OpenReadOnly.
func (s *Store) ReadOnly() bool { return s.readOnly }
