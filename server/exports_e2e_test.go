package server_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/export"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/pack"
	"github.com/clearancehq/clearance/server"
)

// exportEnv is a server whose engine builds validation packs: a ledger key
// (unless unsigned), an export secret and a clock that moves 1 ms per
// reading (and that the test moves further), over a real store (Pebble or
// PostgreSQL). The test runs the worker itself (Exports.Process) or starts
// Exports.Run.
type exportEnv struct {
	*env
	now      *atomic.Int64
	unsigned bool
	o        org
}

var exportSecret = []byte("e2e validation-pack secret")

func newExportEnv(t *testing.T, unsigned bool) *exportEnv {
	t.Helper()
	x := &exportEnv{now: &atomic.Int64{}, unsigned: unsigned}
	x.now.Store(execStart.UnixNano())
	x.env = &env{t: t, dbDir: filepath.Join(t.TempDir(), "db"), opts: server.Options{RateLimit: -1}}
	x.open()
	secret, err := x.engine.Admin.NewPlatformSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := x.engine.Admin.EnsurePlatformKey(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	x.platform = secret
	t.Cleanup(x.stop)
	x.o = x.createOrg("Exports")
	return x
}

func (x *exportEnv) clock() time.Time {
	return time.Unix(0, x.now.Add(int64(time.Millisecond))).UTC()
}

// open opens the store of dbDir and serves it (a restart after stop).
func (x *exportEnv) open() {
	t := x.t
	t.Helper()
	st := openBackend(t, x.dbDir, x.clock)
	opts := clearance.Options{Now: x.clock, ExportSecret: exportSecret}
	if !x.unsigned {
		opts.LedgerKey = testLedgerKey(t)
	}
	eng, err := clearance.Open(st, opts)
	if err != nil {
		t.Fatalf("open engine: %v", err)
	}
	x.store, x.engine = st, eng
	x.srv = httptest.NewServer(server.New(eng, x.opts))
	x.client = x.srv.Client()
}

func (x *exportEnv) restart() {
	x.stop()
	x.open()
}

func exportsPath(orgID string) string { return "/v1/orgs/" + orgID + "/audit-exports" }

// decisions makes n decisions of the org, of every outcome of the starter
// policy, in two workflows.
func (x *exportEnv) decisions(key string, n int) {
	x.t.Helper()
	amounts := []int{5, 1500, 20000, 50}
	for i := range n {
		x.decide(key, fmt.Sprintf(`{"amount":%d,"workflow_key":"wf-%d","decision_type":"REFUND"}`, amounts[i%len(amounts)], i%2))
	}
}

// process runs the worker once and wants built packs finished.
func (x *exportEnv) process(built int, opts export.WorkerOptions) {
	x.t.Helper()
	n, err := x.engine.Exports.Process(context.Background(), opts)
	if err != nil || n != built {
		x.t.Fatalf("ProcessExports: %d finished, %v; want %d", n, err, built)
	}
}

// verifyOptions are what the export's record and the service publish.
func (x *exportEnv) verifyOptions(rec *result, orgID string) pack.VerifyOptions {
	return pack.VerifyOptions{ManifestSHA256: rec.str("manifest_sha256"), BundleSHA256: rec.str("bundle_sha256"),
		Key: pack.OrgKey(exportSecret, orgID), Signature: rec.str("bundle_signature_hmac_sha256"),
		LedgerVerifierKey: x.engine.Audit.LedgerVerifierKey()}
}

// download fetches a pack and checks its headers against its record.
func (x *exportEnv) download(t *testing.T, key string, rec *result) []byte {
	t.Helper()
	r := x.do("GET", rec.str("download_url"), key, nil, nil).want(t, http.StatusOK)
	if r.Header.Get(server.HeaderBundleSHA256) != rec.str("bundle_sha256") || r.Header.Get(server.HeaderManifestSHA256) != rec.str("manifest_sha256") ||
		r.Header.Get(server.HeaderBundleSignature) != rec.str("bundle_signature_hmac_sha256") || r.Header.Get("Content-Type") != rec.str("content_type") ||
		!strings.Contains(r.Header.Get("Content-Disposition"), rec.str("export_id")) || int64(len(r.Raw)) != int64(rec.num("size_bytes")) {
		t.Errorf("download headers %v do not match the record %s", r.Header, rec)
	}
	if pack.Digest(r.Raw) != rec.str("bundle_sha256") {
		t.Errorf("the download is not the recorded bundle_sha256")
	}
	return r.Raw
}

// zipFile returns one file of a zip pack.
func zipFile(t *testing.T, bundle []byte, name string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(bundle), int64(len(bundle)))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := zr.Open(name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The whole lifecycle in every format: queued (202, PENDING, 409 on
// download), built by the worker, SUCCEEDED with hashes and signature, the
// download verifies and holds every decision; both steps are ledgered.
func TestExportLifecycleEveryFormat(t *testing.T) {
	t.Parallel()
	x := newExportEnv(t, false)
	writer, reader := x.createKey(x.o, "audit:write"), x.createKey(x.o, "audit:read")
	x.decisions(x.o.Key, 13)
	path := exportsPath(x.o.ID)

	ids := map[pack.Format]string{}
	for _, f := range []pack.Format{pack.FormatJSON, pack.FormatCSV, pack.FormatPDF} {
		r := x.do("POST", path, writer, map[string]any{"format": f, "include_events": true}, nil).want(t, http.StatusAccepted)
		if r.str("status") != "PENDING" || r.num("attempts") != 0 || r.str("manifest_sha256") != "" || r.str("completed_at") != "" ||
			r.Header.Get("Location") != path+"/"+r.str("export_id") || r.JSON["include_events"] != true || r.str("format") != string(f) {
			t.Fatalf("queued: %s", r)
		}
		ids[f] = r.str("export_id")
		x.do("GET", path+"/"+ids[f]+"/download", reader, nil, nil).wantProblem(t, http.StatusConflict, "EXPORT_NOT_READY")
	}
	x.do("POST", path, reader, `{"format":"json"}`, nil).wantProblem(t, http.StatusForbidden, "INSUFFICIENT_SCOPE")

	x.process(3, export.WorkerOptions{})
	for f, id := range ids {
		rec := x.do("GET", path+"/"+id, reader, nil, nil).want(t, http.StatusOK)
		if rec.str("status") != "SUCCEEDED" || rec.num("attempts") != 1 || rec.str("completed_at") == "" || rec.str("last_error") != "" ||
			len(rec.str("bundle_signature_hmac_sha256")) != 64 || rec.num("counts.decisions") != 13 || rec.str("download_url") == "" {
			t.Fatalf("%s built: %s", f, rec)
		}
		bundle := x.download(t, reader, rec)
		rep, err := pack.Verify(bundle, x.verifyOptions(rec, x.o.ID))
		if err != nil || len(rep.Skipped) != 0 {
			t.Fatalf("%s: the downloaded pack does not verify: %v, skipped %v", f, err, rep.Skipped)
		}
		if rep.Manifest.Ledger.Size != uint64(rec.num("ledger_size")) || !rep.Manifest.Ledger.Signed || rep.Manifest.Counts.Grants != 0 {
			t.Errorf("%s manifest: %+v", f, rep.Manifest)
		}
		switch f {
		case pack.FormatJSON:
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(bundle, &doc); err != nil || doc["manifest"] == nil {
				t.Errorf("json pack: %v", err)
			}
			var rows []pack.Decision
			if err := json.Unmarshal(doc["decisions"], &rows); err != nil || len(rows) != 13 {
				t.Errorf("json decisions: %v, %d rows", err, len(rows))
			}
		case pack.FormatCSV, pack.FormatPDF:
			recs, err := csv.NewReader(bytes.NewReader(zipFile(t, bundle, "decisions.csv"))).ReadAll()
			if err != nil || len(recs) != 1+13 {
				t.Errorf("decisions.csv: %v, %d records for 13 decisions", err, len(recs))
			}
			if f == pack.FormatPDF {
				if pages, err := pack.CheckPDF(zipFile(t, bundle, "report.pdf")); err != nil || pages < 1 {
					t.Errorf("report.pdf: %d pages, %v", pages, err)
				}
			}
		}
	}

	list := x.do("GET", path+"?limit=2", reader, nil, nil).want(t, http.StatusOK)
	got := []string{list.str("exports.0.export_id"), list.str("exports.1.export_id")}
	if list.str("org_id") != x.o.ID || !slices.Equal(got, []string{ids[pack.FormatPDF], ids[pack.FormatCSV]}) || lookup(list.JSON, "exports.2") != nil {
		t.Errorf("list, newest first: %s", list)
	}
	var requested, completed int
	for _, en := range x.entries(x.o.Key) {
		switch en["kind"] {
		case ledger.KindExportRequested:
			requested++
		case ledger.KindExportCompleted:
			completed++
		}
	}
	if requested != 3 || completed != 3 {
		t.Errorf("ledger: %d export.requested, %d export.completed entries; want 3 and 3", requested, completed)
	}
	x.verify(x.o.Key)
}

// Org scoping, the platform key, idempotency, windows and bad requests.
func TestExportScopingAndRequests(t *testing.T) {
	t.Parallel()
	x := newExportEnv(t, false)
	other := x.createOrg("Other")
	x.decisions(x.o.Key, 6)
	path := exportsPath(x.o.ID)
	mid := x.clock()
	x.decisions(x.o.Key, 4)

	first := x.do("POST", path, x.o.Key, `{"format":"csv"}`, nil).want(t, http.StatusAccepted)
	id := first.str("export_id")
	x.do("GET", path+"/"+id, other.Key, nil, nil).wantProblem(t, http.StatusForbidden, "ORG_MISMATCH")
	x.do("GET", exportsPath(other.ID)+"/"+id, other.Key, nil, nil).wantProblem(t, http.StatusNotFound, "EXPORT_NOT_FOUND")
	x.do("GET", exportsPath(other.ID)+"/"+id+"/download", other.Key, nil, nil).wantProblem(t, http.StatusNotFound, "EXPORT_NOT_FOUND")
	x.do("GET", path+"/"+id, x.platform, nil, nil).want(t, http.StatusOK)
	x.do("GET", exportsPath(unknownID), x.platform, nil, nil).wantProblem(t, http.StatusNotFound, "ORG_NOT_FOUND")
	if l := x.do("GET", exportsPath(other.ID), other.Key, nil, nil).want(t, http.StatusOK); lookup(l.JSON, "exports.0") != nil {
		t.Errorf("another org lists this org's packs: %s", l)
	}

	// Idempotency-Key: the same request is the same pack; another is 409.
	idem := map[string]string{server.HeaderIdempotencyKey: "pack-1"}
	win := map[string]any{"format": "json", "from": mid.Format(time.RFC3339Nano), "include_events": true}
	a := x.do("POST", path, x.o.Key, win, idem).want(t, http.StatusAccepted)
	b := x.do("POST", path, x.o.Key, `{ "include_events": true, "from": "`+mid.Format(time.RFC3339Nano)+`", "format": "json" }`, idem).want(t, http.StatusOK)
	if a.str("export_id") != b.str("export_id") || b.Header.Get(server.HeaderReplayed) != "true" {
		t.Errorf("replay: %s then %s", a, b)
	}
	x.do("POST", path, x.o.Key, `{"format":"pdf"}`, idem).wantProblem(t, http.StatusConflict, "IDEMPOTENCY_KEY_REUSED")

	for _, c := range []struct{ body, code string }{
		{`{"format":"xml"}`, "INVALID_EXPORT_FORMAT"},
		{`{"format":""}`, "INVALID_EXPORT_FORMAT"},
		{`{}`, "INVALID_EXPORT_FORMAT"},
		{`{"format":"json","from":"yesterday"}`, "INVALID_EXPORT_WINDOW"},
		{`{"format":"json","from":"2026-11-02T00:00:00Z","to":"2026-11-01T00:00:00Z"}`, "INVALID_EXPORT_WINDOW"},
		{`{"format":"json","to":"1969-12-31T00:00:00Z"}`, "INVALID_EXPORT_WINDOW"},
		{`{"format":"json","include_events":"yes"}`, "WRONG_TYPE"},
		{`{"format":"json","scope":"all"}`, "UNKNOWN_MEMBER"},
	} {
		x.do("POST", path, x.o.Key, c.body, nil).wantProblem(t, http.StatusBadRequest, c.code)
	}
	x.do("GET", path+"?limit=101", x.o.Key, nil, nil).wantProblem(t, http.StatusBadRequest, "INVALID_REQUEST")
	x.do("GET", path+"?limit=0", x.o.Key, nil, nil).wantProblem(t, http.StatusBadRequest, "INVALID_QUERY")
	x.do("GET", path+"/not-an-id", x.o.Key, nil, nil).wantProblem(t, http.StatusNotFound, "EXPORT_NOT_FOUND")

	x.process(2, export.WorkerOptions{})
	full := x.do("GET", path+"/"+id, x.o.Key, nil, nil).want(t, http.StatusOK)
	part := x.do("GET", path+"/"+a.str("export_id"), x.o.Key, nil, nil).want(t, http.StatusOK)
	if full.num("counts.decisions") != 10 || part.num("counts.decisions") != 4 || full.num("counts.events") != 0 {
		t.Errorf("window counts: all %s, from mid %s", full, part)
	}
	// The windowed pack with events proves that exactly its 4 decisions
	// were recorded in the window, out of a ledger that holds all 10.
	bundle := x.download(t, x.o.Key, part)
	rep, err := pack.Verify(bundle, x.verifyOptions(part, x.o.ID))
	if err != nil || rep.Manifest.Counts.Events < 10 {
		t.Fatalf("windowed pack: %v %+v", err, rep.Manifest)
	}
}

// A pack downloaded and then tampered with fails verification with the reason.
func TestExportTamperedDownloadFails(t *testing.T) {
	t.Parallel()
	x := newExportEnv(t, false)
	x.decisions(x.o.Key, 5)
	r := x.do("POST", exportsPath(x.o.ID), x.o.Key, `{"format":"json","include_events":true}`, nil).want(t, http.StatusAccepted)
	x.process(1, export.WorkerOptions{})
	rec := x.do("GET", exportsPath(x.o.ID)+"/"+r.str("export_id"), x.o.Key, nil, nil).want(t, http.StatusOK)
	bundle := x.download(t, x.o.Key, rec)
	opts := x.verifyOptions(rec, x.o.ID)
	for _, c := range []struct {
		name    string
		edit    func([]byte) []byte
		reasons []string
	}{
		{"a flipped byte", func(b []byte) []byte { b[len(b)/3] ^= 0x20; return b }, []string{pack.ReasonBundleHash, pack.ReasonSignature}},
		{"the manifest's window edited", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"from": "1970-01-01T00:00:00Z"`), []byte(`"from": "1971-01-01T00:00:00Z"`), 1)
		}, []string{pack.ReasonBundleHash, pack.ReasonSignature, pack.ReasonManifestHash}},
		{"a decision's outcome edited", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"outcome":"BLOCK"`), []byte(`"outcome":"ALLOW"`), 1)
		}, []string{pack.ReasonBundleHash, pack.ReasonFileHash, pack.ReasonCount, pack.ReasonWorkflows}},
	} {
		_, err := pack.Verify(c.edit(bytes.Clone(bundle)), opts)
		ve, ok := err.(*pack.VerifyError)
		if !ok {
			t.Fatalf("%s: the tampered pack verifies: %v", c.name, err)
		}
		var got []string
		for _, p := range ve.Problems {
			got = append(got, p.Reason)
		}
		for _, want := range c.reasons {
			if !slices.Contains(got, want) {
				t.Errorf("%s: want %s among %v", c.name, want, ve.Problems)
			}
		}
	}
	if _, err := pack.Verify(bundle, opts); err != nil {
		t.Fatalf("the untouched pack: %v", err)
	}
}

// A worker stopped mid-build hands the pack back; after a restart on the
// same store the pack is built again and completes.
func TestExportResumesAfterRestart(t *testing.T) {
	t.Parallel()
	x := newExportEnv(t, false)
	x.decisions(x.o.Key, 20)
	id := x.do("POST", exportsPath(x.o.ID), x.o.Key, `{"format":"csv","include_events":true}`, nil).want(t, http.StatusAccepted).str("export_id")

	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	opts := export.WorkerOptions{ChunkBytes: 1024, Hook: func(s export.Stage) {
		if s.Stage == "chunk" && s.Chunk == 1 {
			stop() // the server shuts down while chunk 2 is being written
		}
	}}
	go func() {
		defer close(stopped)
		x.engine.Exports.Run(ctx, opts)
	}()
	<-stopped
	rec := x.do("GET", exportsPath(x.o.ID)+"/"+id, x.o.Key, nil, nil).want(t, http.StatusOK)
	if rec.str("status") != "PENDING" || rec.num("attempts") != 1 || rec.str("last_error") == "" {
		t.Fatalf("after the stop mid-build: %s", rec)
	}
	x.do("GET", exportsPath(x.o.ID)+"/"+id+"/download", x.o.Key, nil, nil).wantProblem(t, http.StatusConflict, "EXPORT_NOT_READY")

	x.restart()
	x.process(1, export.WorkerOptions{ChunkBytes: 1024})
	rec = x.do("GET", exportsPath(x.o.ID)+"/"+id, x.o.Key, nil, nil).want(t, http.StatusOK)
	if rec.str("status") != "SUCCEEDED" || rec.num("attempts") != 2 || rec.str("last_error") != "" {
		t.Fatalf("after the restart: %s", rec)
	}
	if _, err := pack.Verify(x.download(t, x.o.Key, rec), x.verifyOptions(rec, x.o.ID)); err != nil {
		t.Fatalf("the resumed pack: %v", err)
	}
}

// A worker that dies mid-build (no hand-back) leaves its pack RUNNING; no
// one takes it while its lease lasts, and after it a restarted server
// rebuilds it, overwriting the dead worker's chunks.
func TestExportCrashedWorkerIsTakenOver(t *testing.T) {
	t.Parallel()
	x := newExportEnv(t, false)
	x.decisions(x.o.Key, 20)
	id := x.do("POST", exportsPath(x.o.ID), x.o.Key, `{"format":"pdf","include_events":true}`, nil).want(t, http.StatusAccepted).str("export_id")

	died := make(chan struct{})
	go func() {
		defer close(died)
		_, _ = x.engine.Exports.Process(context.Background(), export.WorkerOptions{ChunkBytes: 2048, Hook: func(s export.Stage) {
			if s.Stage == "chunk" && s.Chunk == 2 {
				runtime.Goexit() // the worker dies between two chunks
			}
		}})
	}()
	<-died
	rec := x.do("GET", exportsPath(x.o.ID)+"/"+id, x.o.Key, nil, nil).want(t, http.StatusOK)
	if rec.str("status") != "RUNNING" || rec.num("attempts") != 1 {
		t.Fatalf("after the crash: %s", rec)
	}
	x.process(0, export.WorkerOptions{}) // its lease is live

	x.now.Add(int64(export.DefaultLease + time.Second))
	x.restart()
	x.process(1, export.WorkerOptions{})
	rec = x.do("GET", exportsPath(x.o.ID)+"/"+id, x.o.Key, nil, nil).want(t, http.StatusOK)
	if rec.str("status") != "SUCCEEDED" || rec.num("attempts") != 2 {
		t.Fatalf("after the takeover: %s", rec)
	}
	if _, err := pack.Verify(x.download(t, x.o.Key, rec), x.verifyOptions(rec, x.o.ID)); err != nil {
		t.Fatalf("the rebuilt pack: %v", err)
	}
}

// Exports.Run builds a pack queued over HTTP without being asked.
func TestExportWorkerPicksUpQueuedPacks(t *testing.T) {
	t.Parallel()
	x := newExportEnv(t, false)
	x.decisions(x.o.Key, 3)
	built := make(chan string, 1)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.engine.Exports.Run(ctx, export.WorkerOptions{Poll: time.Hour, Hook: func(s export.Stage) {
			if s.Stage == "built" {
				built <- s.ExportID
			}
		}})
	}()
	id := x.do("POST", exportsPath(x.o.ID), x.o.Key, `{"format":"json"}`, nil).want(t, http.StatusAccepted).str("export_id")
	if got := <-built; got != id {
		t.Fatalf("built %s, queued %s", got, id)
	}
	stop()
	<-done
	rec := x.do("GET", exportsPath(x.o.ID)+"/"+id, x.o.Key, nil, nil).want(t, http.StatusOK)
	if rec.str("status") != "SUCCEEDED" {
		t.Fatalf("%s", rec)
	}
}

// A ledger that no longer verifies fails the build for good, with the
// reason in last_error; the download is 409 EXPORT_FAILED.
func TestExportOfBrokenLedgerFails(t *testing.T) {
	t.Parallel()
	x := newExportEnv(t, false)
	x.decisions(x.o.Key, 4)
	x.stop()
	withRawDB(t, x.dbDir, func(db rawDB) {
		en := db.entry(x.o.ID, 3)
		en.PayloadDigest = sha256Digest([]byte("rewritten"))
		db.putEntry(x.o.ID, 3, en)
	})
	x.open()
	id := x.do("POST", exportsPath(x.o.ID), x.o.Key, `{"format":"csv","include_events":true}`, nil).want(t, http.StatusAccepted).str("export_id")
	x.process(1, export.WorkerOptions{})
	rec := x.do("GET", exportsPath(x.o.ID)+"/"+id, x.o.Key, nil, nil).want(t, http.StatusOK)
	if rec.str("status") != "FAILED" || !strings.Contains(rec.str("last_error"), "LEDGER_BROKEN") || rec.str("completed_at") == "" || rec.str("bundle_sha256") != "" {
		t.Fatalf("%s", rec)
	}
	x.do("GET", exportsPath(x.o.ID)+"/"+id+"/download", x.o.Key, nil, nil).wantProblem(t, http.StatusConflict, "EXPORT_FAILED")
}

// Without a ledger key the pack records the unsigned head and the root its
// events hash to, and says so.
func TestExportWithoutLedgerKey(t *testing.T) {
	t.Parallel()
	x := newExportEnv(t, true)
	x.decisions(x.o.Key, 4)
	id := x.do("POST", exportsPath(x.o.ID), x.o.Key, `{"format":"json","include_events":true}`, nil).want(t, http.StatusAccepted).str("export_id")
	x.process(1, export.WorkerOptions{})
	rec := x.do("GET", exportsPath(x.o.ID)+"/"+id, x.o.Key, nil, nil).want(t, http.StatusOK)
	rep, err := pack.Verify(x.download(t, x.o.Key, rec), x.verifyOptions(rec, x.o.ID))
	if err != nil || rep.Manifest.Ledger.Signed || rep.Manifest.Ledger.UnsignedReason != clearance.CodeLedgerKeyNotConfigured ||
		rep.Manifest.Ledger.Size != x.head(x.o.Key)-1 {
		t.Fatalf("unsigned pack: %v %+v", err, rep.Manifest.Ledger)
	}
}

// With events, a pack carries the lifecycle of the grants its decisions
// issued, as it stands when the pack is built.
func TestExportCarriesGrantLifecycles(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	issued := x.grantFor(t, intentSpec{})
	done := x.grantFor(t, intentSpec{})
	x.finalize(t, done.token, x.claimed(t, done).str("claim_token"), "COMMITTED", nil).want(t, http.StatusOK)
	x.req(t, "POST", pathEvaluate, x.o.Key, `{"amount":5}`, nil).want(t, http.StatusOK) // no grant
	x.advance(time.Second)                                                              // the window ends at the request

	id := x.req(t, "POST", exportsPath(x.o.ID), x.o.Key, `{"format":"csv","include_events":true}`, nil).want(t, http.StatusAccepted).str("export_id")
	if n, err := x.engine.Exports.Process(context.Background(), export.WorkerOptions{}); n != 1 || err != nil {
		t.Fatalf("ProcessExports: %d %v", n, err)
	}
	rec := x.req(t, "GET", exportsPath(x.o.ID)+"/"+id, x.o.Key, nil, nil).want(t, http.StatusOK)
	packed := x.req(t, "GET", rec.str("download_url"), x.o.Key, nil, nil).want(t, http.StatusOK).Raw
	rep, err := pack.Verify(packed, pack.VerifyOptions{ManifestSHA256: rec.str("manifest_sha256"), BundleSHA256: rec.str("bundle_sha256"),
		LedgerVerifierKey: x.engine.Audit.LedgerVerifierKey()})
	if err != nil || rep.Manifest.Counts.Decisions != 3 || rep.Manifest.Counts.Grants != 2 {
		t.Fatalf("pack: %v %+v", err, rep.Manifest.Counts)
	}
	recs, err := csv.NewReader(bytes.NewReader(zipFile(t, packed, "grants.csv"))).ReadAll()
	if err != nil || len(recs) != 3 {
		t.Fatalf("grants.csv: %v %v", recs, err)
	}
	states := map[string]string{}
	for _, r := range recs[1:] {
		states[r[0]] = r[4] + " confirmed=" + r[10]
		if r[5] == "" || r[6] == "" {
			t.Errorf("grant %s without issued_at or expires_at: %v", r[0], r)
		}
	}
	want := map[string]string{issued.grantID: "ISSUED confirmed=false", done.grantID: "COMMITTED confirmed=false"}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("grant states %v, want %v", states, want)
	}
	if rep.Skipped[0] != "bundle_signature_hmac_sha256: no export key given" || rec.str("bundle_signature_hmac_sha256") != "" {
		t.Errorf("an engine without an export secret signs: %s %v", rec, rep.Skipped)
	}
}
