package artifacttest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/store"
)

const (
	orgA = "org_artifact_a"
	orgB = "org_artifact_b"

	kOverride = "override"
	kDispatch = "dispatch"
	kJob      = "job"
)

// base is the creation time of the suite's first record (whole
// microseconds).
var base = time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)

var errBoom = errors.New("artifacttest: fn failed on purpose")

// equalTimes compares instants, whatever their location.
var equalTimes = gocmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

// Run runs the suite; open returns a fresh, empty backend.
func Run(t *testing.T, open func(t *testing.T) store.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, e env)
	}{
		{"PutGet", testPutGet},
		{"Times", testTimes},
		{"ReplaceMovesRefIndex", testReplace},
		{"ByRefOrderAndLimit", testByRef},
		{"OrgIsolation", testIsolation},
		{"FailedUpdateWritesNothing", testRollback},
		{"ReadYourWrites", testReadYourWrites},
		{"BodiesByteExact", testBodies},
		{"InvalidRefused", testInvalid},
		{"TxUnusableAfterUpdate", testTxAfterUpdate},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"ConcurrentPutsInOneTx", testConcurrentInTx},
		{"RecordLedgeredAndList", testLedgered},
		{"Delete", testDelete},
		{"DataProtectionAtHand", testDataProtection},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := open(t)
			r, ok := b.(artifact.Reader)
			if !ok {
				t.Fatalf("artifacttest: %T does not implement artifact.Reader", b)
			}
			tc.fn(t, env{b: b, r: r})
		})
	}
}

// env is the backend under test and its artifact reads.
type env struct {
	b store.Backend
	r artifact.Reader
}

// update runs fn with the artifact.Tx of an Update of orgID.
func (e env) update(ctx context.Context, orgID string, fn func(tx artifact.Tx) error) error {
	return e.b.Update(ctx, orgID, func(tx store.Tx) error {
		atx, ok := tx.(artifact.Tx)
		if !ok {
			return fmt.Errorf("artifacttest: %T does not implement artifact.Tx", tx)
		}
		return fn(atx)
	})
}

// put writes rs, all of one org, in one Update.
func (e env) put(ctx context.Context, rs ...artifact.Record) error {
	return e.update(ctx, rs[0].OrgID, func(tx artifact.Tx) error {
		for _, r := range rs {
			if err := tx.PutArtifact(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
}

func (e env) mustPut(t *testing.T, rs ...artifact.Record) {
	t.Helper()
	if err := e.put(t.Context(), rs...); err != nil {
		t.Fatalf("put %s/%s/%s: %v", rs[0].OrgID, rs[0].Kind, rs[0].ID, err)
	}
}

func (e env) byRef(t *testing.T, orgID, kind, ref string, limit int) []artifact.Record {
	t.Helper()
	rs, err := e.r.ArtifactsByRef(t.Context(), orgID, kind, ref, limit)
	if err != nil {
		t.Fatalf("ArtifactsByRef(%s, %s, %q, %d): %v", orgID, kind, ref, limit, err)
	}
	return rs
}

func newRecord(orgID, kind, id, ref string, minute int) artifact.Record {
	return artifact.Record{
		OrgID:     orgID,
		Kind:      kind,
		ID:        id,
		Ref:       ref,
		CreatedAt: base.Add(time.Duration(minute) * time.Minute),
		Body:      fmt.Appendf(nil, `{ "z":1,"id":%q,  "note":"caf\u00e9 ☃ <&>" }`, id),
	}
}

// stored is r as a backend returns it: CreatedAt truncated to the
// microsecond, an empty body as nil.
func stored(r artifact.Record) artifact.Record {
	r.CreatedAt = r.CreatedAt.Truncate(time.Microsecond)
	if len(r.Body) == 0 {
		r.Body = nil
	}
	return r
}

func wantRecord(t *testing.T, what string, got artifact.Record, err error, want artifact.Record) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want = stored(want)
	if diff := gocmp.Diff(want, got, equalTimes); diff != "" {
		t.Fatalf("%s (-want +got):\n%s", what, diff)
	}
	if !bytes.Equal(got.Body, want.Body) {
		t.Fatalf("%s: body differs", what)
	}
}

func wantRecords(t *testing.T, what string, got, want []artifact.Record) {
	t.Helper()
	ws := make([]artifact.Record, len(want))
	for i, r := range want {
		ws[i] = stored(r)
	}
	if len(ws) == 0 {
		ws = nil
	}
	if len(got) == 0 {
		got = nil
	}
	if diff := gocmp.Diff(keys(ws), keys(got)); diff != "" {
		t.Fatalf("%s: records (-want +got):\n%s", what, diff)
	}
	if diff := gocmp.Diff(ws, got, equalTimes); diff != "" {
		t.Fatalf("%s (-want +got):\n%s", what, diff)
	}
}

// keys returns "org/kind/id" of each record, for readable diffs.
func keys(rs []artifact.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.OrgID+"/"+r.Kind+"/"+r.ID)
	}
	return out
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("%s: error %v, want store.ErrNotFound", what, err)
	}
}

func wantRefused(t *testing.T, what string, err, sentinel error) {
	t.Helper()
	var ae *artifact.Error
	if !errors.Is(err, sentinel) || !errors.As(err, &ae) {
		t.Fatalf("%s: error %v, want an *artifact.Error wrapping %v", what, err, sentinel)
	}
}

func testPutGet(t *testing.T, e env) {
	want := newRecord(orgA, kOverride, "ovr_1", "dos_1", 1)
	e.mustPut(t, want)

	got, err := e.r.Artifact(t.Context(), orgA, kOverride, want.ID)
	wantRecord(t, "Artifact", got, err, want)
	err = e.update(t.Context(), orgA, func(tx artifact.Tx) error {
		got, err := tx.ArtifactInTx(t.Context(), kOverride, want.ID)
		wantRecord(t, "ArtifactInTx", got, err, want)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantRecords(t, "ArtifactsByRef", e.byRef(t, orgA, kOverride, "dos_1", 0), []artifact.Record{want})

	_, err = e.r.Artifact(t.Context(), orgA, kOverride, "ovr_missing")
	wantNotFound(t, "Artifact(missing id)", err)
	// The same id under another kind is another record.
	_, err = e.r.Artifact(t.Context(), orgA, kDispatch, want.ID)
	wantNotFound(t, "Artifact(other kind)", err)
	other := newRecord(orgA, kDispatch, want.ID, "grant_1", 2)
	e.mustPut(t, other)
	got, err = e.r.Artifact(t.Context(), orgA, kDispatch, want.ID)
	wantRecord(t, "Artifact(dispatch)", got, err, other)
	got, err = e.r.Artifact(t.Context(), orgA, kOverride, want.ID)
	wantRecord(t, "Artifact(override after dispatch)", got, err, want)
}

func testTimes(t *testing.T, e env) {
	// A time in another location, with nanoseconds: read back truncated to
	// the microsecond, in UTC.
	loc := time.FixedZone("UTC-7", -7*3600)
	r := newRecord(orgA, kOverride, "ovr_tz", "dos_tz", 0)
	r.CreatedAt = time.Date(2026, 3, 1, 5, 0, 0, 123456789, loc)
	e.mustPut(t, r)
	got, err := e.r.Artifact(t.Context(), orgA, kOverride, r.ID)
	wantRecord(t, "Artifact", got, err, r)
	if got.CreatedAt.Location() != time.UTC || got.CreatedAt.Nanosecond() != 123456000 {
		t.Fatalf("CreatedAt = %v, want %v in UTC", got.CreatedAt, r.CreatedAt.Truncate(time.Microsecond).UTC())
	}

	// Instants that differ below the microsecond are equal: ties go by id,
	// in both listings.
	at := base.Add(time.Hour)
	x := newRecord(orgA, kOverride, "ovr_a", "dos_ns", 0)
	x.CreatedAt = at.Add(999 * time.Nanosecond)
	y := newRecord(orgA, kOverride, "ovr_b", "dos_ns", 0)
	y.CreatedAt = at.Add(1 * time.Nanosecond)
	e.mustPut(t, y, x)
	wantRecords(t, "ArtifactsByRef(sub-microsecond)", e.byRef(t, orgA, kOverride, "dos_ns", 0), []artifact.Record{x, y})

	// The whole allowed range keeps its order, before the Unix epoch and
	// far after it included.
	instants := []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(1677, 6, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2262, 4, 12, 0, 0, 0, 0, time.UTC),
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
	}
	var want []artifact.Record
	for i, ts := range instants {
		r := newRecord(orgA, kOverride, fmt.Sprintf("ovr_%d", len(instants)-i), "dos_range", 0)
		r.CreatedAt = ts
		want = append(want, r)
	}
	for _, i := range []int{3, 7, 0, 5, 1, 6, 2, 4} {
		e.mustPut(t, want[i])
	}
	wantRecords(t, "ArtifactsByRef(range)", e.byRef(t, orgA, kOverride, "dos_range", 0), want)
}

func testReplace(t *testing.T, e env) {
	old := newRecord(orgA, kJob, "job_1", "pending", 1)
	e.mustPut(t, old)
	repl := newRecord(orgA, kJob, "job_1", "done", 5)
	repl.Body = []byte(`{"state":"done","rows":12}`)
	e.mustPut(t, repl)

	got, err := e.r.Artifact(t.Context(), orgA, kJob, "job_1")
	wantRecord(t, "Artifact after replace", got, err, repl)
	wantRecords(t, "ArtifactsByRef(old ref)", e.byRef(t, orgA, kJob, "pending", 0), nil)
	wantRecords(t, "ArtifactsByRef(new ref)", e.byRef(t, orgA, kJob, "done", 0), []artifact.Record{repl})

	// Same ref, later CreatedAt: the record moves within its ref, once.
	x := newRecord(orgA, kOverride, "ovr_x", "dos_1", 2)
	y := newRecord(orgA, kOverride, "ovr_y", "dos_1", 3)
	e.mustPut(t, x, y)
	x.CreatedAt = base.Add(4 * time.Minute)
	e.mustPut(t, x)
	wantRecords(t, "ArtifactsByRef(moved in time)", e.byRef(t, orgA, kOverride, "dos_1", 0), []artifact.Record{y, x})

	// An identical put leaves one record.
	e.mustPut(t, y)
	wantRecords(t, "ArtifactsByRef(identical put)", e.byRef(t, orgA, kOverride, "dos_1", 0), []artifact.Record{y, x})

	// Several replaces in one transaction: only the last one is indexed.
	steps := []artifact.Record{
		newRecord(orgA, kJob, "job_2", "pending", 10),
		newRecord(orgA, kJob, "job_2", "running", 11),
		newRecord(orgA, kJob, "job_2", "failed", 12),
	}
	last := steps[len(steps)-1]
	last.Body = nil
	steps[len(steps)-1] = last
	err = e.update(t.Context(), orgA, func(tx artifact.Tx) error {
		for _, s := range steps {
			if err := tx.PutArtifact(t.Context(), s); err != nil {
				return err
			}
			got, err := tx.ArtifactInTx(t.Context(), kJob, "job_2")
			wantRecord(t, "ArtifactInTx after put", got, err, s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"pending", "running"} {
		if got := e.byRef(t, orgA, kJob, ref, 0); slices.ContainsFunc(got, func(r artifact.Record) bool { return r.ID == "job_2" }) {
			t.Fatalf("job_2 still listed under %q after moving on", ref)
		}
	}
	wantRecords(t, "ArtifactsByRef(failed)", e.byRef(t, orgA, kJob, "failed", 0), []artifact.Record{last})
	got, err = e.r.Artifact(t.Context(), orgA, kJob, "job_2")
	wantRecord(t, "Artifact(job_2)", got, err, last)

	// Back to an earlier ref.
	back := newRecord(orgA, kJob, "job_1", "pending", 20)
	e.mustPut(t, back)
	wantRecords(t, "ArtifactsByRef(back to pending)", e.byRef(t, orgA, kJob, "pending", 0), []artifact.Record{back})
	wantRecords(t, "ArtifactsByRef(done after moving back)", e.byRef(t, orgA, kJob, "done", 0), nil)
}

func testByRef(t *testing.T, e env) {
	// Overrides of dos_1 at minutes 1..6, written out of order, plus ties
	// at minute 3 that sort by id bytewise ("ovr_03" < "ovr_3" < "ovr_7").
	var all []artifact.Record
	for _, n := range []int{4, 1, 6, 3, 2, 5} {
		all = append(all, newRecord(orgA, kOverride, fmt.Sprintf("ovr_%d", n), "dos_1", n))
	}
	all = append(all, newRecord(orgA, kOverride, "ovr_7", "dos_1", 3), newRecord(orgA, kOverride, "ovr_03", "dos_1", 3))
	for _, r := range all {
		e.mustPut(t, r)
	}
	// Neighbours that must not be listed with them: a ref and a kind that
	// extend the ones asked for, a shorter ref, the empty ref, another
	// kind, another org.
	noise := []artifact.Record{
		newRecord(orgA, kOverride, "ovr_10", "dos_10", 1),
		newRecord(orgA, kOverride, "ovr_short", "dos_", 1),
		newRecord(orgA, kOverride, "ovr_none", "", 1),
		newRecord(orgA, kOverride+"s", "ovr_s", "dos_1", 1),
		newRecord(orgA, kDispatch, "ovr_1", "dos_1", 1),
		newRecord(orgB, kOverride, "ovr_b", "dos_1", 1),
	}
	for _, r := range noise {
		e.mustPut(t, r)
	}
	byID := map[string]artifact.Record{}
	for _, r := range all {
		byID[r.ID] = r
	}
	ordered := func(ids ...string) []artifact.Record {
		var out []artifact.Record
		for _, id := range ids {
			out = append(out, byID[id])
		}
		return out
	}
	full := []string{"ovr_1", "ovr_2", "ovr_03", "ovr_3", "ovr_7", "ovr_4", "ovr_5", "ovr_6"}
	for _, c := range []struct {
		name  string
		limit int
		want  []string
	}{
		{"All", 0, full},
		{"NegativeLimit", -1, full},
		{"LimitOne", 1, full[:1]},
		{"LimitCutsTies", 4, full[:4]},
		{"LimitExact", len(full), full},
		{"LimitAbove", len(full) + 5, full},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantRecords(t, "ArtifactsByRef", e.byRef(t, orgA, kOverride, "dos_1", c.limit), ordered(c.want...))
		})
	}
	wantRecords(t, "ArtifactsByRef(dos_10)", e.byRef(t, orgA, kOverride, "dos_10", 0), noise[:1])
	wantRecords(t, "ArtifactsByRef(dos_)", e.byRef(t, orgA, kOverride, "dos_", 0), noise[1:2])
	wantRecords(t, "ArtifactsByRef(empty ref)", e.byRef(t, orgA, kOverride, "", 0), noise[2:3])
	wantRecords(t, "ArtifactsByRef(overrides)", e.byRef(t, orgA, kOverride+"s", "dos_1", 0), noise[3:4])
	wantRecords(t, "ArtifactsByRef(dispatch)", e.byRef(t, orgA, kDispatch, "dos_1", 0), noise[4:5])
	wantRecords(t, "ArtifactsByRef(dos)", e.byRef(t, orgA, kOverride, "dos", 0), nil)
	wantRecords(t, "ArtifactsByRef(unknown kind)", e.byRef(t, orgA, "chain", "dos_1", 0), nil)
	wantRecords(t, "ArtifactsByRef(org B)", e.byRef(t, orgB, kOverride, "dos_1", 0), noise[5:6])
}

func testIsolation(t *testing.T, e env) {
	a := newRecord(orgA, kOverride, "ovr_1", "dos_1", 1)
	e.mustPut(t, a)
	_, err := e.r.Artifact(t.Context(), orgB, kOverride, a.ID)
	wantNotFound(t, "Artifact(other org's id)", err)
	wantRecords(t, "ArtifactsByRef(other org)", e.byRef(t, orgB, kOverride, "dos_1", 0), nil)
	err = e.update(t.Context(), orgB, func(tx artifact.Tx) error {
		_, err := tx.ArtifactInTx(t.Context(), kOverride, a.ID)
		wantNotFound(t, "ArtifactInTx(other org's id)", err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The same key in another org is another record.
	b := newRecord(orgB, kOverride, a.ID, "dos_1", 1)
	b.Body = []byte(`{"org":"b"}`)
	e.mustPut(t, b)
	got, err := e.r.Artifact(t.Context(), orgA, kOverride, a.ID)
	wantRecord(t, "Artifact(org A)", got, err, a)
	got, err = e.r.Artifact(t.Context(), orgB, kOverride, a.ID)
	wantRecord(t, "Artifact(org B)", got, err, b)
	wantRecords(t, "ArtifactsByRef(org A)", e.byRef(t, orgA, kOverride, "dos_1", 0), []artifact.Record{a})
	wantRecords(t, "ArtifactsByRef(org B)", e.byRef(t, orgB, kOverride, "dos_1", 0), []artifact.Record{b})

	// Replacing org B's record leaves org A's alone.
	b.Ref = "dos_2"
	e.mustPut(t, b)
	wantRecords(t, "ArtifactsByRef(org A after B moved)", e.byRef(t, orgA, kOverride, "dos_1", 0), []artifact.Record{a})

	// A transaction may not write another org's record, new or existing.
	overwrite := a
	overwrite.Body = []byte(`{"overwritten":true}`)
	for _, c := range []struct {
		txOrg string
		r     artifact.Record
	}{
		{orgA, newRecord(orgB, kOverride, "ovr_new", "dos_1", 1)},
		{orgB, overwrite},
	} {
		err = e.update(t.Context(), c.txOrg, func(tx artifact.Tx) error {
			return tx.PutArtifact(t.Context(), c.r)
		})
		wantRefused(t, "PutArtifact of org "+c.r.OrgID+" in a transaction of org "+c.txOrg, err, artifact.ErrOrgMismatch)
	}
	_, err = e.r.Artifact(t.Context(), orgB, kOverride, "ovr_new")
	wantNotFound(t, "Artifact(refused write)", err)
	got, err = e.r.Artifact(t.Context(), orgA, kOverride, a.ID)
	wantRecord(t, "Artifact(org A after refused overwrite)", got, err, a)
}

func testRollback(t *testing.T, e env) {
	kept := newRecord(orgA, kJob, "job_0", "pending", 0)
	e.mustPut(t, kept)
	fresh := []artifact.Record{
		newRecord(orgA, kJob, "job_1", "pending", 1),
		newRecord(orgA, kOverride, "ovr_1", "dos_1", 1),
	}
	moved := kept
	moved.Ref, moved.Body = "done", []byte(`{"moved":true}`)
	err := e.update(t.Context(), orgA, func(tx artifact.Tx) error {
		for _, r := range append(slices.Clone(fresh), moved) {
			if err := tx.PutArtifact(t.Context(), r); err != nil {
				return err
			}
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want the fn's error", err)
	}
	for _, r := range fresh {
		_, err := e.r.Artifact(t.Context(), orgA, r.Kind, r.ID)
		wantNotFound(t, "Artifact("+r.ID+")", err)
	}
	got, err := e.r.Artifact(t.Context(), orgA, kJob, kept.ID)
	wantRecord(t, "Artifact(kept)", got, err, kept)
	wantRecords(t, "ArtifactsByRef(pending)", e.byRef(t, orgA, kJob, "pending", 0), []artifact.Record{kept})
	wantRecords(t, "ArtifactsByRef(done)", e.byRef(t, orgA, kJob, "done", 0), nil)
	wantRecords(t, "ArtifactsByRef(dos_1)", e.byRef(t, orgA, kOverride, "dos_1", 0), nil)

	// The same writes then commit.
	e.mustPut(t, append(slices.Clone(fresh), moved)...)
	wantRecords(t, "ArtifactsByRef(pending) after commit", e.byRef(t, orgA, kJob, "pending", 0), fresh[:1])
	wantRecords(t, "ArtifactsByRef(done) after commit", e.byRef(t, orgA, kJob, "done", 0), []artifact.Record{moved})
}

func testReadYourWrites(t *testing.T, e env) {
	r := newRecord(orgA, kOverride, "ovr_1", "dos_1", 1)
	r2 := r
	r2.Ref, r2.Body = "dos_2", []byte(`{"second":true}`)
	err := e.update(t.Context(), orgA, func(tx artifact.Tx) error {
		ctx := t.Context()
		_, err := tx.ArtifactInTx(ctx, kOverride, r.ID)
		wantNotFound(t, "ArtifactInTx before put", err)
		if err := tx.PutArtifact(ctx, r); err != nil {
			return err
		}
		got, err := tx.ArtifactInTx(ctx, kOverride, r.ID)
		wantRecord(t, "ArtifactInTx after put", got, err, r)
		// Readers see only committed data.
		_, err = e.r.Artifact(ctx, orgA, kOverride, r.ID)
		wantNotFound(t, "Artifact before commit", err)
		wantRecords(t, "ArtifactsByRef before commit", e.byRef(t, orgA, kOverride, "dos_1", 0), nil)
		if err := tx.PutArtifact(ctx, r2); err != nil {
			return err
		}
		got, err = tx.ArtifactInTx(ctx, kOverride, r.ID)
		wantRecord(t, "ArtifactInTx after replace", got, err, r2)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.r.Artifact(t.Context(), orgA, kOverride, r.ID)
	wantRecord(t, "Artifact after commit", got, err, r2)
	wantRecords(t, "ArtifactsByRef(dos_1)", e.byRef(t, orgA, kOverride, "dos_1", 0), nil)
	wantRecords(t, "ArtifactsByRef(dos_2)", e.byRef(t, orgA, kOverride, "dos_2", 0), []artifact.Record{r2})
}

// bigBody is 200 KiB holding every byte value, in an order that is not
// periodic on short scales.
func bigBody() []byte {
	b := make([]byte, 200<<10)
	var x uint32 = 2463534242
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x) ^ byte(i)
	}
	for i := range 256 {
		b[i] = byte(i)
	}
	return b
}

func testBodies(t *testing.T, e env) {
	bodies := []struct {
		id   string
		body []byte
	}{
		{"non_utf8", []byte{0x00, 0xff, 0xfe, 0xc3, 0x28, 0x80, 0xed, 0xa0, 0x80, '"', '\\', 0x7f, 0x01, 0x00}},
		{"json_uncanonical", []byte("{ \"b\" : 1,\n\t\"a\":\"\\u00e9\\/\", \"a\":2 }\n")},
		{"nul_only", []byte{0}},
		{"large", bigBody()},
		{"empty", []byte{}},
		{"nil", nil},
		{"bom", []byte("\xef\xbb\xbf{}")},
	}
	var want []artifact.Record
	for i, c := range bodies {
		r := newRecord(orgA, kDispatch, c.id, "grant_1", i)
		r.Body = c.body
		want = append(want, r)
	}
	err := e.update(t.Context(), orgA, func(tx artifact.Tx) error {
		for _, r := range want {
			// The backend keeps its own copy: the caller may reuse the
			// slice once PutArtifact returns.
			body := bytes.Clone(r.Body)
			r.Body = body
			if err := tx.PutArtifact(t.Context(), r); err != nil {
				return err
			}
			for i := range body {
				body[i] ^= 0x5a
			}
		}
		for _, r := range want {
			got, err := tx.ArtifactInTx(t.Context(), r.Kind, r.ID)
			wantRecord(t, "ArtifactInTx("+r.ID+")", got, err, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range want {
		got, err := e.r.Artifact(t.Context(), orgA, r.Kind, r.ID)
		wantRecord(t, "Artifact("+r.ID+")", got, err, r)
		// Changing the returned body does not change the stored one.
		if len(got.Body) > 0 {
			got.Body[0] ^= 0xff
			again, err := e.r.Artifact(t.Context(), orgA, r.Kind, r.ID)
			wantRecord(t, "Artifact("+r.ID+") after changing a read", again, err, r)
		}
	}
	wantRecords(t, "ArtifactsByRef", e.byRef(t, orgA, kDispatch, "grant_1", 0), want)
}

func testInvalid(t *testing.T, e env) {
	ok := newRecord(orgA, kOverride, "ovr_bad", "dos_bad", 1)
	edit := func(f func(r *artifact.Record)) artifact.Record {
		r := ok
		f(&r)
		return r
	}
	long := strings.Repeat("x", artifact.MaxIDLen+1)
	bad := []struct {
		name string
		r    artifact.Record
	}{
		{"EmptyKind", edit(func(r *artifact.Record) { r.Kind = "" })},
		{"EmptyID", edit(func(r *artifact.Record) { r.ID = "" })},
		{"KindUppercase", edit(func(r *artifact.Record) { r.Kind = "Override" })},
		{"KindSpace", edit(func(r *artifact.Record) { r.Kind = "over ride" })},
		{"KindSlash", edit(func(r *artifact.Record) { r.Kind = "over/ride" })},
		{"KindNUL", edit(func(r *artifact.Record) { r.Kind = "override\x00" })},
		{"KindTooLong", edit(func(r *artifact.Record) { r.Kind = strings.Repeat("k", artifact.MaxKindLen+1) })},
		{"IDNUL", edit(func(r *artifact.Record) { r.ID = "ovr\x00bad" })},
		{"IDNewline", edit(func(r *artifact.Record) { r.ID = "ovr\nbad" })},
		{"IDDEL", edit(func(r *artifact.Record) { r.ID = "ovr\x7f" })},
		{"IDInvalidUTF8", edit(func(r *artifact.Record) { r.ID = "ovr\xff" })},
		{"IDTooLong", edit(func(r *artifact.Record) { r.ID = long })},
		{"RefNUL", edit(func(r *artifact.Record) { r.Ref = "dos_bad\x00" })},
		{"RefTab", edit(func(r *artifact.Record) { r.Ref = "dos\tbad" })},
		{"RefC1", edit(func(r *artifact.Record) { r.Ref = "dos_bad\u009b" })},
		{"RefInvalidUTF8", edit(func(r *artifact.Record) { r.Ref = "dos_bad\xc3" })},
		{"RefTooLong", edit(func(r *artifact.Record) { r.Ref = long })},
		{"ZeroCreatedAt", edit(func(r *artifact.Record) { r.CreatedAt = time.Time{} })},
		{"CreatedAtYear10000", edit(func(r *artifact.Record) { r.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) })},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			err := e.put(t.Context(), c.r)
			wantRefused(t, "PutArtifact", err, artifact.ErrInvalid)
			if want := c.r.Validate(); err.Error() != want.Error() {
				t.Fatalf("PutArtifact = %q, want Validate's error %q", err, want)
			}
		})
	}
	_, err := e.r.Artifact(t.Context(), orgA, kOverride, ok.ID)
	wantNotFound(t, "Artifact after refused puts", err)
	wantRecords(t, "ArtifactsByRef after refused puts", e.byRef(t, orgA, kOverride, "dos_bad", 0), nil)

	// A refusal leaves the transaction usable: fn may go on and commit.
	err = e.update(t.Context(), orgA, func(tx artifact.Tx) error {
		ctx := t.Context()
		wantRefused(t, "PutArtifact(invalid)", tx.PutArtifact(ctx, bad[0].r), artifact.ErrInvalid)
		wantRefused(t, "PutArtifact(other org)", tx.PutArtifact(ctx, edit(func(r *artifact.Record) { r.OrgID = orgB })), artifact.ErrOrgMismatch)
		_, err := tx.ArtifactInTx(ctx, "Bad", "x")
		wantRefused(t, "ArtifactInTx(bad kind)", err, artifact.ErrInvalid)
		_, err = tx.ArtifactInTx(ctx, kOverride, "x\x00")
		wantRefused(t, "ArtifactInTx(NUL id)", err, artifact.ErrInvalid)
		_, err = tx.ArtifactInTx(ctx, kOverride, "")
		wantRefused(t, "ArtifactInTx(empty id)", err, artifact.ErrInvalid)
		return tx.PutArtifact(ctx, ok)
	})
	if err != nil {
		t.Fatalf("Update after refusals: %v", err)
	}
	got, err := e.r.Artifact(t.Context(), orgA, kOverride, ok.ID)
	wantRecord(t, "Artifact(written after refusals)", got, err, ok)
	_, err = e.r.Artifact(t.Context(), orgB, kOverride, ok.ID)
	wantNotFound(t, "Artifact(refused org B write)", err)

	// Lookups no record could answer are refused, not "not found".
	ctx := t.Context()
	lookups := []struct {
		name string
		call func() error
	}{
		{"ArtifactEmptyOrg", func() error { _, err := e.r.Artifact(ctx, "", kOverride, "x"); return err }},
		{"ArtifactEmptyKind", func() error { _, err := e.r.Artifact(ctx, orgA, "", "x"); return err }},
		{"ArtifactBadKind", func() error { _, err := e.r.Artifact(ctx, orgA, "Override", "x"); return err }},
		{"ArtifactEmptyID", func() error { _, err := e.r.Artifact(ctx, orgA, kOverride, ""); return err }},
		{"ArtifactNULID", func() error { _, err := e.r.Artifact(ctx, orgA, kOverride, "\x00"); return err }},
		{"ArtifactNULOrg", func() error { _, err := e.r.Artifact(ctx, "org\x00", kOverride, "x"); return err }},
		{"ArtifactInvalidUTF8ID", func() error { _, err := e.r.Artifact(ctx, orgA, kOverride, "\xfe"); return err }},
		{"ByRefEmptyOrg", func() error { _, err := e.r.ArtifactsByRef(ctx, "", kOverride, "r", 0); return err }},
		{"ByRefEmptyKind", func() error { _, err := e.r.ArtifactsByRef(ctx, orgA, "", "r", 0); return err }},
		{"ByRefNULRef", func() error { _, err := e.r.ArtifactsByRef(ctx, orgA, kOverride, "r\x00", 0); return err }},
		{"ByRefInvalidUTF8Ref", func() error { _, err := e.r.ArtifactsByRef(ctx, orgA, kOverride, "\xc3", 0); return err }},
		{"ByRefLongRef", func() error { _, err := e.r.ArtifactsByRef(ctx, orgA, kOverride, long, 0); return err }},
	}
	for _, c := range lookups {
		wantRefused(t, c.name, c.call(), artifact.ErrInvalid)
	}
}

func testTxAfterUpdate(t *testing.T, e env) {
	var leaked artifact.Tx
	if err := e.update(t.Context(), orgA, func(tx artifact.Tx) error { leaked = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	r := newRecord(orgA, kOverride, "ovr_late", "dos_1", 1)
	if err := leaked.PutArtifact(t.Context(), r); err == nil {
		t.Fatal("PutArtifact on a finished transaction succeeded")
	}
	if _, err := leaked.ArtifactInTx(t.Context(), r.Kind, r.ID); err == nil {
		t.Fatal("ArtifactInTx on a finished transaction succeeded")
	}
	_, err := e.r.Artifact(t.Context(), orgA, r.Kind, r.ID)
	wantNotFound(t, "Artifact(late put)", err)
}

// sortAll orders records by (CreatedAt, OrgID, ID): within one org, as
// ArtifactsByRef does.
func sortAll(rs []artifact.Record) {
	slices.SortFunc(rs, func(a, b artifact.Record) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.OrgID, b.OrgID), strings.Compare(a.ID, b.ID))
	})
}

func testConcurrentUpdates(t *testing.T, e env) {
	// Workers put to two orgs at once, each record in its own Update;
	// several records share an instant.
	const workers, each = 8, 25
	orgs := []string{orgA, orgB}
	rec := func(w, i int) artifact.Record {
		n := w*each + i
		r := newRecord(orgs[w%2], kJob, fmt.Sprintf("dsp_%04d", n), "grant_c", 0)
		r.CreatedAt = base.Add(time.Duration(n%40) * time.Microsecond)
		return r
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if err := e.put(context.Background(), rec(w, i)); err != nil {
					t.Errorf("worker %d put %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	perOrg := map[string][]artifact.Record{}
	for w := range workers {
		for i := range each {
			r := rec(w, i)
			got, err := e.r.Artifact(t.Context(), r.OrgID, r.Kind, r.ID)
			wantRecord(t, "Artifact", got, err, r)
			perOrg[r.OrgID] = append(perOrg[r.OrgID], r)
		}
	}
	for org, rs := range perOrg {
		sortAll(rs)
		wantRecords(t, "ArtifactsByRef("+org+")", e.byRef(t, org, kJob, "grant_c", 0), rs)
	}
}

func testConcurrentInTx(t *testing.T, e env) {
	// Goroutines share one transaction; every put lands, atomically.
	const workers, each = 8, 10
	var want []artifact.Record
	err := e.update(t.Context(), orgA, func(tx artifact.Tx) error {
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					r := newRecord(orgA, kOverride, fmt.Sprintf("ovr_%d_%d", w, i), "dos_shared", w*each+i)
					if err := tx.PutArtifact(context.Background(), r); err != nil {
						errs <- err
						return
					}
					if _, err := tx.ArtifactInTx(context.Background(), r.Kind, r.ID); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		return <-errs // nil when the channel is empty
	})
	if err != nil {
		t.Fatal(err)
	}
	for w := range workers {
		for i := range each {
			want = append(want, newRecord(orgA, kOverride, fmt.Sprintf("ovr_%d_%d", w, i), "dos_shared", w*each+i))
		}
	}
	sortAll(want)
	wantRecords(t, "ArtifactsByRef", e.byRef(t, orgA, kOverride, "dos_shared", 0), want)
}

// testDelete: a deleted record is gone from every read, its ref index
// included, in the transaction at once and for readers after commit; a
// failed Update deletes nothing; deleting nothing reports false.
func testDelete(t *testing.T, e env) {
	ctx := t.Context()
	r := newRecord(orgA, kOverride, "ovr_1", "dos_1", 1)
	other := newRecord(orgB, kOverride, "ovr_1", "dos_1", 1)
	for _, rec := range []artifact.Record{r, other} {
		if err := e.update(ctx, rec.OrgID, func(tx artifact.Tx) error { return tx.PutArtifact(ctx, rec) }); err != nil {
			t.Fatal(err)
		}
	}
	err := e.update(ctx, orgA, func(tx artifact.Tx) error {
		if _, err := tx.DeleteArtifact(ctx, kOverride, r.ID); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update: %v, want %v", err, errBoom)
	}
	got, err := e.r.Artifact(ctx, orgA, kOverride, r.ID)
	wantRecord(t, "Artifact after a failed delete", got, err, r)
	err = e.update(ctx, orgA, func(tx artifact.Tx) error {
		deleted, err := tx.DeleteArtifact(ctx, kOverride, r.ID)
		if err != nil || !deleted {
			return fmt.Errorf("DeleteArtifact = %v, %v; want true", deleted, err)
		}
		_, err = tx.ArtifactInTx(ctx, kOverride, r.ID)
		wantNotFound(t, "ArtifactInTx after delete", err)
		deleted, err = tx.DeleteArtifact(ctx, kOverride, r.ID)
		if err != nil || deleted {
			return fmt.Errorf("second DeleteArtifact = %v, %v; want false", deleted, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.r.Artifact(ctx, orgA, kOverride, r.ID)
	wantNotFound(t, "Artifact after delete", err)
	wantRecords(t, "ArtifactsByRef after delete", e.byRef(t, orgA, kOverride, "dos_1", 0), nil)
	got, err = e.r.Artifact(ctx, orgB, kOverride, other.ID)
	wantRecord(t, "other org's record", got, err, other)
	// A record put again after its deletion is a new record.
	if err := e.update(ctx, orgA, func(tx artifact.Tx) error { return tx.PutArtifact(ctx, r) }); err != nil {
		t.Fatal(err)
	}
	wantRecords(t, "ArtifactsByRef after put again", e.byRef(t, orgA, kOverride, "dos_1", 0), []artifact.Record{r})
}

// testDataProtection: the org's data-protection artifact is what
// DataProtectionInTx answers, as of the transaction (its own put and
// delete included), and only the org's own.
func testDataProtection(t *testing.T, e env) {
	ctx := t.Context()
	at := func(orgID string) []byte {
		var body []byte
		if err := e.b.Update(ctx, orgID, func(tx store.Tx) error {
			var err error
			body, err = tx.DataProtectionInTx(ctx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return body
	}
	if b := at(orgA); len(b) != 0 {
		t.Fatalf("fresh org: %q, want none", b)
	}
	setting := artifact.Record{OrgID: orgA, Kind: store.DataProtectionKind, ID: store.DataProtectionID, CreatedAt: base,
		Body: []byte(`{"subject":"/actor/id"}`)}
	err := e.b.Update(ctx, orgA, func(tx store.Tx) error {
		if err := tx.PutArtifact(ctx, setting); err != nil {
			return err
		}
		b, err := tx.DataProtectionInTx(ctx)
		if err != nil || !bytes.Equal(b, setting.Body) {
			return fmt.Errorf("after put in the transaction: %q, %v", b, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if b := at(orgA); !bytes.Equal(b, setting.Body) {
		t.Fatalf("after commit: %q, want %q", b, setting.Body)
	}
	if b := at(orgB); len(b) != 0 {
		t.Fatalf("other org: %q, want none", b)
	}
	// A failed Update's delete is not kept.
	err = e.b.Update(ctx, orgA, func(tx store.Tx) error {
		if _, err := tx.DeleteArtifact(ctx, store.DataProtectionKind, store.DataProtectionID); err != nil {
			return err
		}
		if b, err := tx.DataProtectionInTx(ctx); err != nil || len(b) != 0 {
			return fmt.Errorf("after delete in the transaction: %q, %v", b, err)
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update: %v, want %v", err, errBoom)
	}
	if b := at(orgA); !bytes.Equal(b, setting.Body) {
		t.Fatalf("after a failed delete: %q, want %q", b, setting.Body)
	}
	if err := e.b.Update(ctx, orgA, func(tx store.Tx) error {
		_, err := tx.DeleteArtifact(ctx, store.DataProtectionKind, store.DataProtectionID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if b := at(orgA); len(b) != 0 {
		t.Fatalf("after delete: %q, want none", b)
	}
}
