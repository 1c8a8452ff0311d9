package store

import (
	"context"
	"database/sql"
)

// FileHash returns the SHA-256 cached for path when the file still has the
// size and modification time it had when hashed, or "" when there is none.
func (s *Store) FileHash(ctx context.Context, path string, size, mtimeNs int64) (string, error) {
	var h string
	err := s.db.QueryRowContext(ctx, "SELECT sha256 FROM file_hashes WHERE path = ? AND size = ? AND mtime_ns = ?", path, size, mtimeNs).Scan(&h)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return h, s.wrap0("read file hash", err)
}

// PutFileHash caches path's SHA-256 for its size and modification time.
func (s *Store) PutFileHash(ctx context.Context, path string, size, mtimeNs int64, sha string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO file_hashes(path, size, mtime_ns, sha256, created) VALUES (?,?,?,?,?)
		ON CONFLICT(path) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256, created = excluded.created`,
		path, size, mtimeNs, sha, now())
	return s.wrap0("save file hash", err)
}

// ReadOnly says whether the store was opened with OpenReadOnly.
func (s *Store) ReadOnly() bool { return s.readOnly }
