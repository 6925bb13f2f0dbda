//go:build unix

package approver

import (
	"os"
	"syscall"
)

// lockExclusive takes an exclusive, non-blocking advisory lock on f; it is
// released when f is closed or the process ends.
func lockExclusive(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
