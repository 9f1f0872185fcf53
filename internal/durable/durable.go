// Package durable replaces files so that a crash leaves either the old
// content or the new, never a mix, and a finished write survives a power
// loss: the state file's and the fleet cache's way to disk.
package durable

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with b: written to a temporary file in the same
// directory (".NAME.tmp", mode perm), synced, renamed over path, and the
// directory synced for the rename. On an error the temporary file is
// removed and path is left as it was.
func WriteFile(path string, b []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
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
		os.Remove(tmp)
		return err
	}
	dh, err := os.Open(dir)
	if err != nil {
		return nil // written and renamed; the directory's sync is best effort
	}
	err = dh.Sync()
	dh.Close()
	return err
}
