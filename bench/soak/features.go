package soak

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clearancehq/clearance/client"
	"github.com/clearancehq/clearance/webhook"
)

// Count is how one kind of harness operation went.
type Count struct {
	OK, Failed int64
	// LastError is the last failure's message.
	LastError string `json:",omitempty"`
}

// features drives the org's features besides the load tool's decisions and
// cycles (see doc.go) and counts every operation.
type features struct {
	api    *client.Client // the org's key
	public *client.Client // no credential: the public share-link routes
	orgID  string
	log    func(format string, a ...any)

	mu     sync.Mutex
	counts map[string]*Count
	logged int // failures logged so far

	ops, failures atomic.Int64 // since the last sample (taken and reset by it)

	// Only the feature loop touches these (lastTo: only the export loop).
	rounds   int
	lastSize int64 // tree size of the previous checkpoint
	oldLink  *link // a share link made before the last revocation
	rng      *rand.Rand
	lastTo   time.Time // end of the previous export's window

	// evaluated are the decisions the harness made (guarded by mu): each
	// must be called back.
	evaluated map[string]bool
}

type link struct{ dossier, sig string }

// maxLogged bounds the failures written to the progress log.
const maxLogged = 20

// record counts one operation of kind; err nil is a success. An operation
// cut short because the run is ending is not counted.
func (f *features) record(ctx context.Context, kind string, err error) bool {
	if err != nil && ctx.Err() != nil {
		return false
	}
	f.mu.Lock()
	c := f.counts[kind]
	if c == nil {
		c = &Count{}
		f.counts[kind] = c
	}
	if err == nil {
		c.OK++
	} else {
		c.Failed++
		c.LastError = err.Error()
		if f.logged < maxLogged {
			f.logged++
			f.log("soak: %s failed: %v", kind, err)
		}
	}
	f.mu.Unlock()
	f.ops.Add(1)
	if err != nil {
		f.failures.Add(1)
	}
	return err == nil
}

// snapshot copies the counts.
func (f *features) snapshot() map[string]Count {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]Count, len(f.counts))
	for k, c := range f.counts {
		out[k] = *c
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// soakWorkflow is the workflow of the harness's own decisions: the only
// ones the callback integration sends (the load tool's are "loadtest").
const soakWorkflow = "soak"

// round is one pass over the features.
func (f *features) round(ctx context.Context) {
	f.rounds++
	req := client.DecisionRequest{DecisionType: ptr("PAYMENT"), WorkflowKey: ptr(soakWorkflow),
		Amount: ptr(float64(100+f.rng.IntN(1_500_000)) / 100)}
	d, err := f.api.EvaluateDecision(ctx, req)
	if !f.record(ctx, "evaluate", err) {
		return
	}
	dossier := d.DossierId.String()
	f.mu.Lock()
	f.evaluated[d.DecisionId.String()] = true
	f.mu.Unlock()

	_, err = f.api.ConsoleDecisions(ctx)
	f.record(ctx, "console_decisions", err)
	_, err = f.api.ConsoleActivity(ctx)
	f.record(ctx, "console_activity", err)
	_, err = f.api.OpenEscalations(ctx)
	f.record(ctx, "console_escalations", err)

	// Seal first: a proof packet needs the decision in a signed checkpoint
	// (the server's sealer signs one within a second, this at once).
	cp, err := f.api.SealLedger(ctx)
	if err == nil && cp.TreeSize < d.LedgerSeq {
		err = fmt.Errorf("a checkpoint of size %d leaves out the acknowledged decision at seq %d", cp.TreeSize, d.LedgerSeq)
	}
	if !f.record(ctx, "checkpoint", err) {
		return
	}
	if f.lastSize > 0 && cp.TreeSize > f.lastSize {
		_, err = f.api.ConsistencyProof(ctx, f.lastSize, cp.TreeSize)
		f.record(ctx, "consistency_proof", err)
	}
	_, err = f.api.InclusionProof(ctx, d.LedgerSeq, cp.TreeSize)
	f.record(ctx, "inclusion_proof", err)
	f.lastSize = cp.TreeSize

	pp, err := f.api.ProofPacket(ctx, f.orgID, dossier)
	if err == nil && pp == nil {
		err = errors.New("an empty proof packet")
	}
	f.record(ctx, "proof_packet", err)

	sl, err := f.api.CreateShareLink(ctx, dossier, client.ShareLinkRequest{ExpiresInSeconds: ptr(3600), ProofBundle: ptr(true)})
	if f.record(ctx, "share_link", err) {
		_, err = f.public.SharedVerification(ctx, dossier, sl.Sig)
		f.record(ctx, "shared_verify", err)
		_, err = f.public.SharedProofBundle(ctx, dossier, sl.Sig)
		f.record(ctx, "shared_proof_bundle", err)
		if f.oldLink == nil {
			f.oldLink = &link{dossier: dossier, sig: sl.Sig}
		}
	}

	_, err = f.api.DryRun(ctx, req)
	f.record(ctx, "dry_run", err)

	if f.rounds%10 == 0 && f.oldLink != nil {
		_, err = f.api.RevokeShareLinks(ctx)
		if f.record(ctx, "revoke_share_links", err) {
			_, err = f.public.SharedVerification(ctx, f.oldLink.dossier, f.oldLink.sig)
			var ce *client.Error
			switch {
			case err == nil:
				err = errors.New("a revoked share link still opens")
			case errors.As(err, &ce) && ce.Status >= 400 && ce.Status < 500:
				err = nil
			}
			f.record(ctx, "revoked_link_refused", err)
			f.oldLink = nil
		}
	}
}

// exportPoll is how often a pending export is looked at.
const exportPoll = 250 * time.Millisecond

// export asks for a validation pack of the decisions since the previous
// one, follows it until built (within limit), downloads it and checks its
// bytes against the record's SHA-256.
// A run that ends while an export is being built leaves it (halt).
func (f *features) export(ctx context.Context, halt <-chan struct{}, limit time.Duration) {
	from, to := f.lastTo, time.Now().UTC().Truncate(time.Microsecond)
	f.lastTo = to
	if err := f.exportWindow(ctx, halt, from, to, limit); err != errHalted {
		f.record(ctx, "export", err)
	}
}

// errHalted: the run ended while the export was being built.
var errHalted = errors.New("the run ended")

func (f *features) exportWindow(ctx context.Context, halt <-chan struct{}, from, to time.Time, limit time.Duration) error {
	e, err := f.api.CreateAuditExport(ctx, f.orgID, client.AuditExportRequest{Format: client.AuditExportRequestFormatJson,
		From: &from, To: &to, IncludeEvents: ptr(false)})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(exportPoll)
	defer tick.Stop()
	for e.Status == client.AuditExportStatusPENDING || e.Status == client.AuditExportStatusRUNNING {
		if time.Now().After(deadline) {
			return fmt.Errorf("export %s still %s after %v", e.ExportId, e.Status, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-halt:
			return errHalted
		case <-tick.C:
		}
		if e, err = f.api.AuditExport(ctx, f.orgID, e.ExportId); err != nil {
			return err
		}
	}
	if e.Status != client.AuditExportStatusSUCCEEDED {
		why := ""
		if e.LastError != nil {
			why = ": " + *e.LastError
		}
		return fmt.Errorf("export %s %s%s", e.ExportId, e.Status, why)
	}
	dl, err := f.api.DownloadAuditExport(ctx, f.orgID, e.ExportId)
	if err != nil {
		return err
	}
	defer dl.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, dl.Body)
	if err != nil {
		return fmt.Errorf("download export %s: %w", e.ExportId, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if e.BundleSha256 == nil || strings.TrimPrefix(*e.BundleSha256, "sha256:") != got {
		return fmt.Errorf("export %s: %d bytes downloaded hash to %s, the record says %v", e.ExportId, n, got, e.BundleSha256)
	}
	return nil
}

// receiver takes the org's decision.resolved callbacks and checks their
// signatures.
type receiver struct {
	srv    *http.Server
	url    string
	secret []byte

	mu        sync.Mutex
	delivered int64
	bad       int64
	decisions map[string]bool // decision ids seen (deliveries are at least once)
}

func newReceiver(secret string) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/hooks", secret: []byte(secret), decisions: map[string]bool{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	ok := err == nil && webhook.Verify(req.Header.Get("X-Clearance-Signature"), body, r.secret, time.Now(), 0) == nil
	var ev client.DecisionResolvedEvent
	if ok {
		ok = json.Unmarshal(body, &ev) == nil && ev.DecisionId != ""
	}
	r.mu.Lock()
	if ok {
		r.delivered++
		r.decisions[ev.DecisionId] = true
	} else {
		r.bad++
	}
	r.mu.Unlock()
	if !ok {
		http.Error(w, "bad delivery", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Callbacks is what the receiver took.
type Callbacks struct {
	// Delivered counts signed deliveries, Decisions the distinct decisions
	// among them, Bad the deliveries refused (bad signature or body).
	Delivered, Decisions, Bad int64
}

func (r *receiver) counts() Callbacks {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Callbacks{Delivered: r.delivered, Decisions: int64(len(r.decisions)), Bad: r.bad}
}

func (r *receiver) close() { _ = r.srv.Close() }

// kinds lists the counted kinds, sorted.
func kinds(m map[string]Count) []string { return slices.Sorted(maps.Keys(m)) }
