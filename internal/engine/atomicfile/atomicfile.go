// Package atomicfile writes files that appear whole or not at all: state that must survive a
// crash (outboxes, the drift tracker, caches).
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write writes data to path through a synced temporary file in the same directory (mode 0600)
// and a rename (the directory synced too): a reader sees the old content or the new, never a part.
func Write(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // make the rename durable; best effort
		_ = d.Close()
	}
	return nil
}
