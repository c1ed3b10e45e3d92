package mvcc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive advisory lock on dir/LOCK, so two processes
// can never write one log: the second gets a clear error instead of
// corrupting the first one's state. The lock is released when the returned
// file is closed or the process dies (including by kill -9).
func lockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("mvcc: creating %s: %w", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("mvcc: opening lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("mvcc: %s is in use by another process", dir)
		}
		return nil, fmt.Errorf("mvcc: locking %s: %w", dir, err)
	}
	return f, nil
}
