//go:build !unix

package approver

import "os"

// lockExclusive does nothing where flock is not available: do not run two
// services on one data directory there.
func lockExclusive(*os.File) error { return nil }
