package pebblestore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/store/pebblestore/faultfs"
	"github.com/clearancehq/clearance/tenant"
)

// A disk that fills up: the write that meets the full disk still completes
// (the reserve is released for it), the next ones are refused, and Fault
// says why and that it ends by itself once space is freed.
func ExampleStore_Fault() {
	disk := faultfs.New() // a disk for tests; a deployment passes no FS
	s, err := pebblestore.Open("db", pebblestore.Options{FS: disk, DiskReserve: 64 << 10})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	disk.SetCapacity(disk.Used() + 16<<10)

	ctx := context.Background()
	name := strings.Repeat("n", 1000)
	var acked int
	for {
		err = s.Update(ctx, "org_acme", func(tx store.Tx) error {
			return tx.PutOrg(ctx, tenant.Org{ID: "org_acme", Name: name, CreatedAt: time.Unix(0, 0)})
		})
		if err != nil {
			break
		}
		acked++
	}
	f := s.Fault()
	fmt.Println(acked > 0, errors.Is(err, store.ErrWritesRefused))
	fmt.Println(f.Kind, f.Transient)
	// Output:
	// true true
	// disk_full true
}
