package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/export"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/pack"
	"github.com/clearancehq/clearance/reader"
)

// The reader over HTTP, on Pebble or PostgreSQL (CLEARANCE_E2E_STORE):
// real evidence fetched from the server is posted, without a credential,
// to POST /v1/reader/verify, and the answer says whether it verifies,
// against which key, and why not.

const pathReader = "/v1/reader/verify"

// readerEvidence is what an org hands an auditor about one decision.
type readerEvidence struct {
	dec                                 *result
	packet, capsule, envelopes, consist []byte
}

// evidenceOf decides, seals twice and fetches the decision's packet,
// capsule, producer envelopes and a consistency proof.
func (x *execEnv) evidenceOf(t *testing.T, o org, body string) readerEvidence {
	t.Helper()
	dec := x.req(t, "POST", pathEvaluate, o.Key, body, nil).want(t, http.StatusOK)
	first := x.req(t, "POST", pathSeal, o.Key, `{}`, nil).want(t, http.StatusOK)
	x.req(t, "POST", pathEvaluate, o.Key, `{"amount":8}`, nil).want(t, http.StatusOK)
	x.req(t, "POST", pathSeal, o.Key, `{}`, nil).want(t, http.StatusOK)
	d := pathDossiers + dec.str("dossier_id")
	q := "?org_id=" + o.ID
	return readerEvidence{dec: dec,
		packet:    x.req(t, "GET", d+"/proof-packet"+q, o.Key, nil, nil).want(t, http.StatusOK).Raw,
		capsule:   x.req(t, "GET", d+"/agent-action-capsule"+q, o.Key, nil, nil).want(t, http.StatusOK).Raw,
		envelopes: x.req(t, "GET", d+"/agent-action-capsule/producer-envelopes"+q, o.Key, nil, nil).want(t, http.StatusOK).Raw,
		consist: x.req(t, "GET", pathLedger+"/proofs/consistency?old_size="+strconv.Itoa(int(first.num("tree_size"))), o.Key, nil, nil).
			want(t, http.StatusOK).Raw,
	}
}

// read posts body to the reader without a credential.
func (x *execEnv) read(t *testing.T, body any) *result {
	t.Helper()
	return x.req(t, "POST", pathReader, "", body, nil)
}

// wantReport fails unless r is a 200 report of kind with valid, and
// returns the reasons of its failed checks.
func wantReport(t *testing.T, r *result, kind reader.Kind, valid bool, keySource string) []string {
	t.Helper()
	if r.Status != http.StatusOK || r.str("kind") != string(kind) || r.JSON["valid"] != valid || r.str("key.source") != keySource {
		t.Fatalf("want a %s report, valid %v, key %s: %s", kind, valid, keySource, r)
	}
	var rep reader.Report
	if err := json.Unmarshal(r.Raw, &rep); err != nil || len(rep.Checks) == 0 {
		t.Fatalf("report: %v: %s", err, r)
	}
	var reasons []string
	for _, c := range rep.Checks {
		if c.OK != (c.Reason == "") {
			t.Errorf("check %+v: a reason exactly when it failed", c)
		}
		if !c.OK {
			reasons = append(reasons, c.Reason)
		}
	}
	if valid != (len(reasons) == 0) {
		t.Errorf("valid %v with failed checks %v", valid, reasons)
	}
	return reasons
}

// std64 is a file's bytes as artifact_base64 takes them.
func std64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestReaderVerifiesEvidence(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	ev := x.evidenceOf(t, x.o, `{"amount":7}`)
	serverKey := x.engine.Audit.LedgerVerifierKey()

	// Packets: as JSON, as a file's base64, detected or named; checked
	// against this server's key unless the caller names one.
	for _, body := range []any{
		map[string]any{"artifact": json.RawMessage(ev.packet)},
		map[string]any{"kind": "packet", "artifact_base64": std64(ev.packet)},
		map[string]any{"artifact_base64": std64(ev.packet), "ledger_key": serverKey},
	} {
		r := x.read(t, body)
		src := reader.KeyServer
		if strings.Contains(mustJSON(t, body), "ledger_key") {
			src = reader.KeyCaller
		}
		wantReport(t, r, reader.KindPacket, true, src)
		if r.str("key.verifier_key") != serverKey || r.str("details.checks.0.name") != "packet_format" {
			t.Errorf("packet report: %s", r)
		}
	}
	tampered := bytes.Replace(ev.packet, []byte(`"amount":7`), []byte(`"amount":9`), 1)
	if bytes.Equal(tampered, ev.packet) {
		t.Fatal("no amount in the packet")
	}
	if got := wantReport(t, x.read(t, map[string]any{"artifact_base64": std64(tampered)}), reader.KindPacket, false, reader.KeyServer); len(got) != 1 || got[0] != reader.ReasonDossierDigest {
		t.Errorf("tampered packet: reasons %v, want only %s", got, reader.ReasonDossierDigest)
	}
	// Another deployment's key: the packet is not vouched for.
	other, _ := ledger.NewKey("other-deployment", bytes.Repeat([]byte{9}, 32))
	got := wantReport(t, x.read(t, map[string]any{"artifact_base64": std64(ev.packet), "ledger_key": other.VerifierKey()}),
		reader.KindPacket, false, reader.KeyCaller)
	if got[0] != reader.ReasonKeyNotTrusted {
		t.Errorf("packet under another key: %v", got)
	}

	// Capsules, with and without their producer envelopes.
	wantReport(t, x.read(t, map[string]any{"artifact_base64": std64(ev.capsule)}), reader.KindCapsule, true, reader.KeyNotNeeded)
	r := x.read(t, map[string]any{"artifact": json.RawMessage(ev.capsule), "envelopes": json.RawMessage(ev.envelopes)})
	wantReport(t, r, reader.KindCapsule, true, reader.KeyNotNeeded)
	if r.str("checks.1.name") != "producer_envelope_1" {
		t.Errorf("envelope check: %s", r)
	}
	tcap := bytes.Replace(ev.capsule, []byte(`"accept"`), []byte(`"reject"`), 1)
	if got := wantReport(t, x.read(t, map[string]any{"artifact_base64": std64(tcap)}), reader.KindCapsule, false, reader.KeyNotNeeded); got[0] != reader.ReasonCapsuleClass1 {
		t.Errorf("tampered capsule: %v", got)
	}
	tenv := bytes.Replace(ev.envelopes, []byte(`"cose_sign1":"`), []byte(`"cose_sign1":"A`), 1)
	if got := wantReport(t, x.read(t, map[string]any{"artifact": json.RawMessage(ev.capsule), "envelopes": json.RawMessage(tenv)}),
		reader.KindCapsule, false, reader.KeyNotNeeded); got[0] != reader.ReasonEnvelope {
		t.Errorf("tampered envelope: %v", got)
	}

	// Consistency proofs.
	wantReport(t, x.read(t, map[string]any{"artifact_base64": std64(ev.consist)}), reader.KindLedger, true, reader.KeyServer)
	tcons := bytes.Replace(ev.consist, []byte(`"proof":["`), []byte(`"proof":["A`), 1)
	if got := wantReport(t, x.read(t, map[string]any{"artifact_base64": std64(tcons)}), reader.KindLedger, false, reader.KeyServer); got[0] != reader.ReasonConsistencyMalformed && got[0] != reader.ReasonConsistency {
		t.Errorf("tampered consistency proof: %v", got)
	}

	// Refused input changes nothing and says why.
	x.read(t, map[string]any{"kind": "receipt", "artifact": json.RawMessage(ev.packet)}).wantProblem(t, http.StatusBadRequest, clearance.CodeReaderKindUnknown)
	x.read(t, `{"artifact":{"hello":"world"}}`).wantProblem(t, http.StatusBadRequest, clearance.CodeReaderKindUndetected)
	x.read(t, `{}`).wantProblem(t, http.StatusBadRequest, clearance.CodeReaderArtifactRequired)
	x.read(t, `{"artifact_base64":"***"}`).wantProblem(t, http.StatusBadRequest, clearance.CodeReaderArtifactInvalid)
	x.read(t, map[string]any{"artifact": json.RawMessage(ev.packet), "ledger_key": "not-a-key"}).
		wantProblem(t, http.StatusBadRequest, clearance.CodeReaderLedgerKeyInvalid)
	big := `{"artifact_base64":"` + strings.Repeat("A", 1<<20) + `"}`
	x.read(t, big).wantProblem(t, http.StatusRequestEntityTooLarge, "BODY_TOO_LARGE")
	x.req(t, "POST", pathReader, "", std64(ev.packet), map[string]string{"Content-Type": "application/zip"}).
		wantProblem(t, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE")
	x.ledgerOK(t)
}

// Share links are checked by the server that issued them: a valid one, a
// tampered one, another org's, and one revoked since are told apart only
// as valid or SHARE_LINK_INVALID; the answer names nothing of the org.
func TestReaderShareLinks(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, "")
	dec := x.req(t, "POST", pathEvaluate, x.o.Key, shareDecision, nil).want(t, http.StatusOK)
	x.req(t, "POST", pathSeal, x.o.Key, `{}`, nil).want(t, http.StatusOK)
	id := dec.str("dossier_id")
	l := x.share(t, x.o.Key, id, `{}`).want(t, http.StatusCreated)
	b := x.createOrg("Other")
	decB := x.req(t, "POST", pathEvaluate, b.Key, `{"amount":5}`, nil).want(t, http.StatusOK)
	lB := x.share(t, b.Key, decB.str("dossier_id"), `{}`).want(t, http.StatusCreated)

	for _, link := range []string{l.str("url"), "https://clearance.example.com" + l.str("url")} {
		r := x.read(t, map[string]any{"share_link": link})
		wantReport(t, r, reader.KindShareLink, true, reader.KeyServer)
		if r.str("details.dossier_id") != id || r.str("details.outcome") != "ALLOW" {
			t.Errorf("share link report: %s", r)
		}
		if n := len(lookup(r.JSON, "checks").([]any)); n != 5 {
			t.Errorf("%d checks, want link, digest, entry, chain and checkpoint: %s", n, r)
		}
		wantNoLeak(t, r.Raw, x.o, dec)
	}

	sig := l.str("sig")
	payload, mac, _ := strings.Cut(sig, ".")
	invalid := []string{
		pathPublicDoss + id + "/verify?sig=" + payload + "." + flipAt(mac, 3),     // tampered
		pathPublicDoss + decB.str("dossier_id") + "/verify?sig=" + sig,            // this org's sig on another org's dossier
		pathPublicDoss + id + "/verify?sig=" + lB.str("sig"),                      // another org's sig on this dossier
		pathPublicDoss + "01900000-0000-7000-8000-000000000000/verify?sig=" + sig, // no such dossier
	}
	for _, link := range invalid {
		if got := wantReport(t, x.read(t, map[string]any{"share_link": link}), reader.KindShareLink, false, reader.KeyServer); len(got) != 1 || got[0] != reader.ReasonShareLinkInvalid {
			t.Errorf("%s: %v", link, got)
		}
	}
	x.read(t, map[string]any{"share_link": "https://elsewhere.example/x"}).wantProblem(t, http.StatusBadRequest, clearance.CodeReaderArtifactInvalid)
	x.read(t, map[string]any{"share_link": l.str("url"), "ledger_key": x.engine.Audit.LedgerVerifierKey()}).
		wantProblem(t, http.StatusBadRequest, clearance.CodeReaderArtifactInvalid)

	// Revoked: the same link no longer verifies.
	x.req(t, "DELETE", pathShareRevoke+"?org_id="+x.o.ID, x.o.Key, nil, nil).want(t, http.StatusOK)
	if got := wantReport(t, x.read(t, map[string]any{"share_link": l.str("url")}), reader.KindShareLink, false, reader.KeyServer); got[0] != reader.ReasonShareLinkInvalid {
		t.Errorf("revoked link: %v", got)
	}
	// Another org's link still does.
	wantReport(t, x.read(t, map[string]any{"share_link": lB.str("url")}), reader.KindShareLink, true, reader.KeyServer)
}

// The reader is public and throttled per client address; the page is
// served with a policy that runs only its own script.
func TestReaderThrottleAndPage(t *testing.T) {
	t.Parallel()
	x := newExecEnvWith(t, "", func(x *execEnv) { x.opts.AuthRateLimit = 1 }) // the reader: 3/min, burst 6
	body := `{"artifact":{"hello":"world"}}`
	for range 6 {
		x.read(t, body).wantProblem(t, http.StatusBadRequest, clearance.CodeReaderKindUndetected)
	}
	r := x.read(t, body).wantProblem(t, http.StatusTooManyRequests, "RATE_LIMITED")
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After: %v", r.Header)
	}

	p := x.req(t, "GET", "/reader", "", nil, nil).want(t, http.StatusOK)
	csp := p.Header.Get("Content-Security-Policy")
	if !strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") || !strings.Contains(csp, "default-src 'none'") ||
		!strings.Contains(csp, "connect-src 'self'") || p.Header.Get("X-Frame-Options") != "DENY" ||
		!bytes.Contains(p.Raw, []byte(`<label for="file">`)) || bytes.Contains(p.Raw, []byte("http://")) || bytes.Contains(p.Raw, []byte("https://")) {
		t.Errorf("reader page: %v\n%s", p.Header, p.Raw)
	}
}

// Validation packs: the whole pack (JSON, or the zip as base64), its
// manifest alone, with and without the export record; one changed byte of
// a file is found.
func TestReaderVerifiesPacks(t *testing.T) {
	t.Parallel()
	x := newExportEnv(t, false)
	writer := x.createKey(x.o, "audit:write")
	x.decisions(x.o.Key, 5)
	path := exportsPath(x.o.ID)
	ids := map[pack.Format]string{}
	for _, f := range []pack.Format{pack.FormatJSON, pack.FormatCSV} {
		ids[f] = x.do("POST", path, writer, map[string]any{"format": f, "include_events": true}, nil).want(t, http.StatusAccepted).str("export_id")
	}
	x.process(2, export.WorkerOptions{})
	read := func(body any) *result { return x.do("POST", pathReader, "", body, nil) }
	for f, id := range ids {
		rec := x.do("GET", path+"/"+id, writer, nil, nil).want(t, http.StatusOK)
		bundle := x.download(t, writer, rec)
		record := map[string]any{"manifest_sha256": rec.str("manifest_sha256"), "bundle_sha256": rec.str("bundle_sha256")}
		r := read(map[string]any{"artifact_base64": std64(bundle), "export_record": record})
		wantReport(t, r, reader.KindPack, true, reader.KeyServer)
		if !strings.Contains(string(r.Raw), "checkpoint signature") || !strings.Contains(string(r.Raw), "bundle_sha256") {
			t.Errorf("%s pack: the checks done are not named: %s", f, r)
		}
		var manifest []byte
		if f == pack.FormatJSON {
			// Inline, byte for byte: the files' hashes are over the exact bytes.
			wantReport(t, read(`{"artifact":`+string(bundle)+`}`), reader.KindPack, true, reader.KeyServer)
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(bundle, &doc); err != nil {
				t.Fatal(err)
			}
			manifest = doc["manifest"]
		} else {
			manifest = zipFile(t, bundle, "manifest.json")
		}
		r = read(map[string]any{"artifact_base64": std64(manifest), "export_record": record})
		wantReport(t, r, reader.KindManifest, true, reader.KeyServer)
		if !strings.Contains(string(r.Raw), "a manifest alone") {
			t.Errorf("manifest report does not say what it could not check: %s", r)
		}
		if got := wantReport(t, read(map[string]any{"artifact_base64": std64(bytes.Replace(manifest, []byte(`"size": `), []byte(`"size": 1`), 1))}),
			reader.KindManifest, false, reader.KeyServer); got[0] != pack.ReasonCheckpointMismatch {
			t.Errorf("a manifest claiming another size: %v", got)
		}
		// One changed byte of the bundle.
		i := bytes.Index(bundle, []byte("REFUND"))
		if i < 0 {
			i = len(bundle) / 2
		}
		tampered := bytes.Clone(bundle)
		tampered[i] ^= 0x20
		if got := wantReport(t, read(map[string]any{"artifact_base64": std64(tampered), "export_record": record}), reader.KindPack, false, reader.KeyServer); got[0] != pack.ReasonBundleHash {
			t.Errorf("%s tampered pack: %v", f, got)
		}
	}
}
