package onchain

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Cursor is the last ledger height the bid engine handled, kept in a file so that a
// restart resumes after it. Writes are atomic: a crash leaves the old height or the
// new one, never a torn file.
type Cursor struct {
	path string
}

// NewCursor keeps the cursor in path (its directory is created if missing).
func NewCursor(path string) (*Cursor, error) {
	if path == "" {
		return nil, errors.New("cursor: empty path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("cursor: %w", err)
	}
	return &Cursor{path: path}, nil
}

// Load returns the saved height, or false when none was saved yet.
func (c *Cursor) Load() (int64, bool, error) {
	b, err := os.ReadFile(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("cursor %s: %w", c.path, err)
	}
	h, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || h < 0 {
		return 0, false, fmt.Errorf("cursor %s: %q is not a height (delete the file to resume from the ledger's current height)", c.path, strings.TrimSpace(string(b)))
	}
	return h, true, nil
}

// Save records h: written to a temporary file, synced, renamed over the cursor, and
// the directory synced.
func (c *Cursor) Save(h int64) error {
	dir := filepath.Dir(c.path)
	f, err := os.CreateTemp(dir, ".cursor-*")
	if err != nil {
		return fmt.Errorf("cursor: %w", err)
	}
	tmp := f.Name()
	_, err = f.WriteString(strconv.FormatInt(h, 10) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, c.path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("cursor: save height %d: %w", h, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cursor: %w", err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cursor: sync %s: %w", dir, err)
	}
	return nil
}
