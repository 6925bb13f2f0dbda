package pgstore_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pgstore"
)

// TestArtifactTwoServers: two Stores on one schema (two server processes)
// put to one org and to two orgs at once; every record lands, once, and a
// record replaced through one server is moved in the index the other reads.
func TestArtifactTwoServers(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	servers := []*pgstore.Store{
		openIn(t, schema, pgstore.Options{MaxConns: 4}),
		openIn(t, schema, pgstore.Options{MaxConns: 4}),
	}
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	put := func(s *pgstore.Store, r artifact.Record) error {
		return s.Update(t.Context(), r.OrgID, func(tx store.Tx) error {
			return tx.(artifact.Tx).PutArtifact(t.Context(), r)
		})
	}
	const workers, each = 8, 10
	orgs := []string{"org_two_a", "org_two_b"}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				n := w*each + i
				r := artifact.Record{OrgID: orgs[n%3%2], Kind: "job", ID: fmt.Sprintf("job_%03d", n), Ref: "pending",
					CreatedAt: at.Add(time.Duration(n%7) * time.Second), Body: []byte{byte(n), 0xff}}
				if err := put(servers[w%2], r); err != nil {
					t.Errorf("put %d: %v", n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, s := range servers {
		n := 0
		for _, org := range orgs {
			rs, err := s.ArtifactsByRef(t.Context(), org, "job", "pending", 0)
			if err != nil {
				t.Fatal(err)
			}
			n += len(rs)
		}
		if n != workers*each {
			t.Fatalf("ArtifactsByRef lists %d records; want %d", n, workers*each)
		}
	}

	r, err := servers[0].Artifact(t.Context(), orgs[0], "job", "job_000")
	if err != nil {
		t.Fatal(err)
	}
	r.Ref, r.Body = "done", []byte(`{"done":true}`)
	if err := put(servers[0], r); err != nil {
		t.Fatal(err)
	}
	pending, err := servers[1].ArtifactsByRef(t.Context(), orgs[0], "job", "pending", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pending {
		if p.ID == r.ID {
			t.Fatalf("%s still pending after it was moved", r.ID)
		}
	}
	done, err := servers[1].ArtifactsByRef(t.Context(), orgs[0], "job", "done", 0)
	if err != nil || len(done) != 1 || done[0].ID != r.ID || !bytes.Equal(done[0].Body, r.Body) {
		t.Fatalf("ArtifactsByRef(done) = %+v, %v; want %s", done, err, r.ID)
	}
}
