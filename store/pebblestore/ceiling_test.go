package pebblestore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/store"
)

// TestWriteOnceAroundTheCeiling: dossiers stay write-once whether their
// key is above the range's ceiling (no lookup), below it (written out of
// order), at it, written before the store was opened, or written by a
// transaction that did not commit.
func TestWriteOnceAroundTheCeiling(t *testing.T) {
	fs := vfs.NewMem()
	open := func() *Store {
		t.Helper()
		s, err := Open("db", Options{FS: fs, Logger: quiet{}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const org = "org_1"
	rec := func(id string) dossier.Stored {
		return dossier.Stored{OrgID: org, DossierID: "dos_" + id, DecisionID: "dec_" + id, EvaluationID: "eval_" + id,
			CreatedAt: at, Outcome: "ALLOW", Mode: "SHADOW", Body: []byte(`{}`)}
	}
	put := func(s *Store, r dossier.Stored, abort bool) error {
		return s.Update(t.Context(), org, func(tx store.Tx) error {
			if err := tx.(dossier.Tx).PutDossier(t.Context(), r); err != nil {
				return err
			}
			if abort {
				return errAbort
			}
			return nil
		})
	}
	s := open()
	for _, step := range []struct {
		id      string
		abort   bool
		refused bool
	}{
		{id: "5"},                // the range is empty
		{id: "7"},                // above the ceiling
		{id: "6"},                // below it
		{id: "6", refused: true}, // below it, present
		{id: "7", refused: true}, // at it
		{id: "9", abort: true},   // raises it without committing
		{id: "8"},                // below the raised ceiling, absent
		{id: "9"},                // at it, absent: the write was undone
		{id: "9", refused: true},
	} {
		if step.refused {
			// Each id on its own: the other is new.
			sameDossier, sameDecision := rec(step.id), rec(step.id)
			sameDossier.DecisionID, sameDecision.DossierID = "dec_new", "dos_new"
			for _, r := range []dossier.Stored{sameDossier, sameDecision} {
				if err := put(s, r, false); err == nil {
					t.Fatalf("second put of dossier %s / decision %s succeeded", r.DossierID, r.DecisionID)
				}
			}
			continue
		}
		err := put(s, rec(step.id), step.abort)
		switch {
		case step.abort && !errors.Is(err, errAbort):
			t.Fatalf("put %s in an aborted transaction: %v", step.id, err)
		case !step.abort && err != nil:
			t.Fatalf("put %s: %v", step.id, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open() // the ceiling is read again from what is stored
	t.Cleanup(func() { _ = s.Close() })
	for id := range 10 {
		err := put(s, rec(fmt.Sprint(id)), false)
		if present := id >= 5; present != (err != nil) {
			t.Fatalf("after reopening, put of dossier %d: %v (stored before: %v)", id, err, present)
		}
	}
	// A decision id already indexed is refused under a new dossier id.
	r := rec("a")
	r.DecisionID = "dec_9"
	if err := put(s, r, false); err == nil {
		t.Fatal("a dossier for a decision that has one was stored")
	}
}

var errAbort = errors.New("abort")

// TestArtifactReplacedAroundTheCeiling: PutArtifact replaces the record of
// an existing id (its old index entry removed) above, at and below the
// ceiling of its kind.
func TestArtifactReplacedAroundTheCeiling(t *testing.T) {
	s := openMem(t)
	put := func(id, ref string) {
		t.Helper()
		err := s.Update(t.Context(), "org_1", func(tx store.Tx) error {
			return tx.(artifact.Tx).PutArtifact(t.Context(), artifact.Record{OrgID: "org_1", Kind: "job", ID: id, Ref: ref, CreatedAt: at})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"b", "c", "a"} {
		put(id, "old")
	}
	for _, id := range []string{"a", "b", "c"} { // below, below, at
		put(id, "new")
	}
	for ref, n := range map[string]int{"old": 0, "new": 3} {
		rs, err := s.ArtifactsByRef(t.Context(), "org_1", "job", ref, 0)
		if err != nil || len(rs) != n {
			t.Fatalf("ArtifactsByRef(%s) = %d records, %v; want %d", ref, len(rs), err, n)
		}
	}
}
