package pack_test

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/pack"
)

const (
	orgID    = "0190a000-0000-7000-8000-0000000000aa"
	exportID = "0190a000-0000-7000-8000-0000000000ee"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// fixture is a small org ledger: an org entry, decisions before, inside and
// after a window, grants issued by some of them, and a signed checkpoint.
type fixture struct {
	key       *ledger.Key
	entries   []ledger.Entry
	decisions []pack.Decision // the window's, in seq order
	grants    []pack.Grant
	window    pack.Window
	anchor    pack.Ledger
}

func ledgerKey(t testing.TB, b byte) *ledger.Key {
	t.Helper()
	k, err := ledger.NewKey("clearance-test-ledger", bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newFixture records n decisions in the window (every third with a grant).
func newFixture(t testing.TB, n int) *fixture {
	t.Helper()
	f := &fixture{key: ledgerKey(t, 7), window: pack.Window{From: t0, To: t0.Add(time.Duration(n) * time.Minute)}}
	var head ledger.Head
	add := func(kind, subject string, at time.Time) ledger.Entry {
		e, err := ledger.Next(head, orgID, ledger.Record{Kind: kind, SubjectID: subject, PayloadDigest: canon.Digest([]byte(subject))}, at)
		if err != nil {
			t.Fatal(err)
		}
		head = ledger.Head{Seq: e.Seq, EntryHash: e.EntryHash}
		f.entries = append(f.entries, e)
		return e
	}
	add(ledger.KindOrgCreated, orgID, t0.Add(-time.Hour))
	add(ledger.KindDecision, "dossier-before", t0.Add(-time.Minute))
	outcomes := []string{"ALLOW", "ESCALATE", "BLOCK", "ALLOW", "REVIEW_REQUIRED"}
	for i := range n {
		at := t0.Add(time.Duration(i) * time.Minute)
		dossier := fmt.Sprintf("dossier-%03d", i)
		e := add(ledger.KindDecision, dossier, at)
		d := pack.Decision{LedgerSeq: e.Seq, CreatedAt: e.RecordedAt, DossierID: dossier, DecisionID: fmt.Sprintf("decision-%03d", i),
			Outcome: outcomes[i%len(outcomes)], Mode: []string{"SHADOW", "ENFORCEMENT"}[i%2], WorkflowKey: []string{"refunds", "payouts"}[i%2],
			DecisionType: "REFUND", DossierDigest: e.PayloadDigest, EntryHash: e.EntryHash}
		f.decisions = append(f.decisions, d)
		if i%3 == 0 {
			g := add(ledger.KindGrantIssued, "grant-"+strconv.Itoa(i), at.Add(time.Second))
			f.grants = append(f.grants, pack.Grant{GrantID: g.SubjectID, DecisionID: d.DecisionID, DossierID: dossier,
				WorkflowKey: d.WorkflowKey, State: []string{"ISSUED", "COMMITTED"}[i%2], IssuedAt: g.RecordedAt,
				ExpiresAt: at.Add(2 * time.Minute).Format(time.RFC3339Nano), EffectConfirmed: i%2 == 1})
		}
	}
	add(ledger.KindDecision, "dossier-after", f.window.To)
	f.anchor = f.sign(t, f.key, ledger.Origin("clearance", orgID))
	return f
}

// sign returns the anchor of the whole fixture ledger, signed by k.
func (f *fixture) sign(t testing.TB, k *ledger.Key, origin string) pack.Ledger {
	t.Helper()
	var stored []tlog.Hash
	for i, e := range f.entries {
		leaf, err := e.LeafHash()
		if err != nil {
			t.Fatal(err)
		}
		more, err := tlog.StoredHashesForRecordHash(int64(i), leaf, tlogHashes(stored))
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, more...)
	}
	size := int64(len(f.entries))
	root, err := tlog.TreeHash(size, tlogHashes(stored))
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(root[:])
	msg, err := note.Sign(&note.Note{Text: fmt.Sprintf("%s\n%d\n%s\n", origin, size, b64)}, k)
	if err != nil {
		t.Fatal(err)
	}
	return pack.Ledger{Origin: origin, Size: uint64(size), RootHash: b64, Signed: true, Checkpoint: string(msg), VerifierKey: k.VerifierKey()}
}

type tlogHashes []tlog.Hash

func (h tlogHashes) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = h[x]
	}
	return out, nil
}

func (f *fixture) header(format pack.Format, events bool) pack.Header {
	return pack.Header{OrgID: orgID, ExportID: exportID, Format: format, Window: f.window, IncludeEvents: events,
		GeneratedAt: t0.Add(24 * time.Hour), Ledger: f.anchor}
}

// build writes the fixture's pack.
func (f *fixture) build(t testing.TB, format pack.Format, events bool) ([]byte, pack.Result) {
	t.Helper()
	var buf bytes.Buffer
	b, err := pack.NewBuilder(&buf, f.header(format, events))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range f.entries {
		if err := b.AddEntry(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range f.decisions {
		if err := b.AddDecision(d); err != nil {
			t.Fatal(err)
		}
	}
	if events {
		for _, g := range f.grants {
			if err := b.AddGrant(g); err != nil {
				t.Fatal(err)
			}
		}
	}
	res, err := b.Close()
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), res
}

var secret = []byte("test export secret")

// opts are the verify options of everything the service recorded.
func (f *fixture) opts(bundle []byte, res pack.Result) pack.VerifyOptions {
	key := pack.OrgKey(secret, orgID)
	return pack.VerifyOptions{ManifestSHA256: res.ManifestSHA256, BundleSHA256: pack.Digest(bundle),
		Key: key, Signature: pack.Sign(key, bundle), LedgerVerifierKey: f.key.VerifierKey()}
}

// files splits a pack into its manifest and files, in order.
func files(t testing.TB, bundle []byte) (names []string, data map[string][]byte) {
	t.Helper()
	data = map[string][]byte{}
	if bundle[0] == '{' {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(bundle, &m); err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(bundle))
		dec.Token()
		for dec.More() {
			tok, _ := dec.Token()
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatal(err)
			}
			names = append(names, tok.(string))
			data[tok.(string)] = raw
		}
		return names, data
	}
	zr, err := zip.NewReader(bytes.NewReader(bundle), int64(len(bundle)))
	if err != nil {
		t.Fatal(err)
	}
	for _, zf := range zr.File {
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, zf.Name)
		data[zf.Name] = b
	}
	return names, data
}

// repack writes names and data back into a pack of the same container;
// with rehash, the manifest's file hashes and sizes are first recomputed,
// as a forger would.
func repack(t testing.TB, bundle []byte, names []string, data map[string][]byte, rehash bool) []byte {
	t.Helper()
	manifestName := "manifest.json"
	isJSON := bundle[0] == '{'
	if isJSON {
		manifestName = "manifest"
	}
	if rehash {
		var m pack.Manifest
		if err := json.Unmarshal(data[manifestName], &m); err != nil {
			t.Fatal(err)
		}
		for i, f := range m.Files {
			m.Files[i].SHA256, m.Files[i].Bytes = pack.Digest(data[f.Name]), int64(len(data[f.Name]))
		}
		raw, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		data[manifestName] = raw
	}
	var buf bytes.Buffer
	if isJSON {
		buf.WriteString("{\n")
		for i, n := range names {
			if i > 0 {
				buf.WriteString(",\n")
			}
			fmt.Fprintf(&buf, "%q: %s", n, data[n])
		}
		buf.WriteString("\n}\n")
		return buf.Bytes()
	}
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data[n])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
