package reader_test

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/internal/coded"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/reader"
)

func codeOf(err error) string {
	var ce *coded.Error
	var se *strictjson.Error
	switch {
	case errors.As(err, &ce):
		return ce.Code()
	case errors.As(err, &se):
		return se.Code
	}
	return ""
}

func TestDetect(t *testing.T) {
	for _, c := range []struct {
		in   string
		want reader.Kind
	}{
		{`{"packet_version":"x"}`, reader.KindPacket},
		{`{"spec_version":"x","capsule_id":"y"}`, reader.KindCapsule},
		{`{"proof":[],"old_checkpoint":"a","new_checkpoint":"b"}`, reader.KindLedger},
		{`{"decisions":[],"manifest":{}}`, reader.KindPack},
		{`{"pack_version":"clearance.validation-pack/1"}`, reader.KindManifest},
		{"PK\x03\x04rest", reader.KindPack},
	} {
		if got, err := reader.Detect([]byte(c.in)); err != nil || got != c.want {
			t.Errorf("Detect(%.30q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{`{}`, `{"a":1}`, `[1]`, `"x"`, ``, `garbage`} {
		if _, err := reader.Detect([]byte(in)); codeOf(err) != reader.CodeKindUndetected {
			t.Errorf("Detect(%q): %v, want %s", in, err, reader.CodeKindUndetected)
		}
	}
}

func TestDecodeRequestRefuses(t *testing.T) {
	key, _ := ledger.NewKey("k", bytes.Repeat([]byte{3}, 32))
	for _, c := range []struct{ body, code string }{
		{`{}`, reader.CodeArtifactRequired},
		{`{"artifact":{"a":1},"share_link":"/x"}`, reader.CodeArtifactRequired},
		{`{"artifact":{"a":1},"artifact_base64":"eyJ9"}`, reader.CodeArtifactRequired},
		{`{"artifact":[1]}`, strictjson.CodeWrongType},
		{`{"artifact":null}`, strictjson.CodeWrongType},
		{`{"artifact":"x"}`, strictjson.CodeWrongType},
		{`{"kind":null,"artifact":{}}`, strictjson.CodeWrongType},
		{`{"kind":5,"artifact":{}}`, strictjson.CodeWrongType},
		{`{"kind":"","artifact":{}}`, reader.CodeKindUnknown},
		{`{"artifact_base64":"not base64!"}`, reader.CodeArtifactInvalid},
		{`{"artifact_base64":""}`, reader.CodeArtifactInvalid},
		{`{"artifact_base64":"eyJ"}`, reader.CodeArtifactInvalid}, // unpadded
		{`{"share_link":""}`, reader.CodeArtifactInvalid},
		{`{"artifact":{},"ledger_key":"nope"}`, reader.CodeLedgerKeyInvalid},
		{`{"artifact":{},"envelopes":[]}`, strictjson.CodeWrongType},
		{`{"artifact":{},"export_record":{"bundle_sha256":"x"}}`, reader.CodeArtifactInvalid},
		{`{"artifact":{},"surprise":1}`, strictjson.CodeUnknownMember},
	} {
		_, err := reader.DecodeRequest([]byte(c.body), strictjson.Options{})
		if codeOf(err) != c.code {
			t.Errorf("%s: %v, want %s", c.body, err, c.code)
		}
	}
	in, err := reader.DecodeRequest([]byte(`{"kind":"packet","artifact":{"a":1},"ledger_key":"`+key.VerifierKey()+`"}`), strictjson.Options{})
	if err != nil || in.Kind != reader.KindPacket || string(in.Artifact) != `{"a":1}` || in.LedgerKey != key.VerifierKey() {
		t.Errorf("accepted body read as %+v, %v", in, err)
	}
}

func TestVerifyRefusesInput(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		in   reader.Input
		code string
	}{
		{reader.Input{Kind: "receipt", Artifact: []byte(`{}`)}, reader.CodeKindUnknown},
		{reader.Input{Artifact: []byte(`{"x":1}`)}, reader.CodeKindUndetected},
		{reader.Input{Kind: reader.KindShareLink, ShareLink: "/v1/public/decision-dossiers/d/verify?sig=s"}, reader.CodeKindUnknown}, // no ShareLinks
		{reader.Input{Kind: reader.KindPacket, Artifact: []byte(`{}`), Envelopes: []byte(`{}`)}, reader.CodeArtifactInvalid},
		{reader.Input{Kind: reader.KindCapsule, Artifact: []byte(`{}`), ExportRecord: &reader.ExportRecord{}}, reader.CodeArtifactInvalid},
	} {
		if _, err := reader.Verify(ctx, c.in, reader.Options{}); codeOf(err) != c.code {
			t.Errorf("%+v: %v, want %s", c.in, err, c.code)
		}
	}
}

func TestPacketWithoutAnyKey(t *testing.T) {
	key, _ := ledger.NewKey("clearance-ledger", bytes.Repeat([]byte{1}, 32))
	raw, err := packet(key)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := reader.Verify(context.Background(), reader.Input{Artifact: raw}, reader.Options{})
	if err != nil || rep.Valid || rep.Key.Source != reader.KeyNone {
		t.Fatalf("no key: %+v, %v; want not valid, key none", rep, err)
	}
	if c := rep.Checks[1]; c.OK || c.Reason != reader.ReasonLedgerKeyUnavailable {
		t.Errorf("key check %+v, want %s", c, reader.ReasonLedgerKeyUnavailable)
	}
}

func TestCapsule(t *testing.T) {
	f, err := os.Open("../capsule/testdata/golden/committed-confirmed.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() {
		t.Fatal("no capsule")
	}
	raw := bytes.Clone(sc.Bytes())
	ctx := context.Background()
	rep, err := reader.Verify(ctx, reader.Input{Artifact: raw}, reader.Options{ServerLedgerKey: "ignored"})
	if err != nil || !rep.Valid || rep.Kind != reader.KindCapsule || rep.Key.Source != reader.KeyNotNeeded {
		t.Fatalf("golden capsule: %+v, %v", rep, err)
	}
	tampered := bytes.Replace(raw, []byte(`"decide"`), []byte(`"decidE"`), 1)
	rep, err = reader.Verify(ctx, reader.Input{Artifact: tampered}, reader.Options{})
	if err != nil || rep.Valid || rep.Checks[0].Reason != reader.ReasonCapsuleClass1 || rep.Checks[0].Detail == "" {
		t.Errorf("tampered capsule: %+v, %v", rep, err)
	}
}

// fakeLinks answers like the server's share-link service.
type fakeLinks struct {
	d   reader.SharedDossier
	err error
	got []string
}

func (f *fakeLinks) VerifyShareLink(_ context.Context, dossierID, sig string) (reader.SharedDossier, error) {
	f.got = append(f.got, dossierID+" "+sig)
	return f.d, f.err
}

func TestShareLink(t *testing.T) {
	ctx := context.Background()
	yes := true
	links := &fakeLinks{d: reader.SharedDossier{DossierID: "d1", DossierDigest: "sha256:ab", RecomputedDigestMatches: true,
		LedgerSeq: 3, EntryHashValid: true, ChainValid: true, AnchoredCheckpointValid: &yes, LinkExpiresAt: "2026-12-01T00:00:00Z"}}
	opts := reader.Options{ShareLinks: links, ServerLedgerKey: "server-key"}
	for _, link := range []string{"https://clearance.example.com/v1/public/decision-dossiers/d1/verify?sig=a.b",
		"/v1/public/decision-dossiers/d1/verify?sig=a.b", "  /v1/public/decision-dossiers/d1/verify?sig=a.b\n"} {
		rep, err := reader.Verify(ctx, reader.Input{ShareLink: link}, opts)
		if err != nil || !rep.Valid || rep.Kind != reader.KindShareLink || len(rep.Checks) != 5 || rep.Key.Source != reader.KeyServer {
			t.Errorf("%q: %+v, %v", link, rep, err)
		}
	}
	if links.got[0] != "d1 a.b" {
		t.Errorf("the service was asked %q", links.got[0])
	}

	links.d.RecomputedDigestMatches = false
	rep, _ := reader.Verify(ctx, reader.Input{ShareLink: "/v1/public/decision-dossiers/d1/verify?sig=a.b"}, opts)
	if rep.Valid || rep.Checks[1].Reason != reader.ReasonDossierDigest {
		t.Errorf("a changed dossier: %+v", rep)
	}

	links.err = reader.ErrShareLinkInvalid
	rep, err := reader.Verify(ctx, reader.Input{ShareLink: "/v1/public/decision-dossiers/d1/verify?sig=a.c"}, opts)
	if err != nil || rep.Valid || len(rep.Checks) != 1 || rep.Checks[0].Reason != reader.ReasonShareLinkInvalid {
		t.Errorf("a refused link: %+v, %v", rep, err)
	}
	links.err = reader.ErrShareLinkUnsealed
	rep, err = reader.Verify(ctx, reader.Input{ShareLink: "/v1/public/decision-dossiers/d1/verify?sig=a.c"}, opts)
	if err != nil || rep.Valid || len(rep.Checks) != 2 || rep.Checks[1].Reason != reader.ReasonEntryNotYetSealed {
		t.Errorf("a link whose entry is too far past the checkpoint: %+v, %v", rep, err)
	}
	boom := errors.New("store down")
	links.err = boom
	if _, err := reader.Verify(ctx, reader.Input{ShareLink: "/v1/public/decision-dossiers/d1/verify?sig=a.c"}, opts); !errors.Is(err, boom) {
		t.Errorf("the service's own error: %v", err)
	}

	for _, link := range []string{"/v1/public/decision-dossiers/d1/verify", "/v1/public/decision-dossiers/d1/verify?sig=a&sig=b",
		"/v1/public/decision-dossiers//verify?sig=a", "/v1/other/d1/verify?sig=a", "javascript:alert(1)",
		"/v1/public/decision-dossiers/d1/verify?sig=a&x=1", "https://u:p@h/v1/public/decision-dossiers/d1/verify?sig=a",
		"/v1/public/decision-dossiers/a/b/verify?sig=a", "%zz"} {
		if _, err := reader.Verify(ctx, reader.Input{ShareLink: link}, opts); codeOf(err) != reader.CodeArtifactInvalid {
			t.Errorf("%q: %v, want %s", link, err, reader.CodeArtifactInvalid)
		}
	}
	if _, err := reader.Verify(ctx, reader.Input{ShareLink: "/v1/public/decision-dossiers/d1/verify?sig=a", LedgerKey: "k"}, opts); codeOf(err) != reader.CodeArtifactInvalid {
		t.Errorf("a share link with a ledger key: %v", err)
	}
}

// A zip whose directory declares more than the bound is refused before
// anything is unpacked.
func TestZippedPackBound(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("events.csv")
	_, _ = w.Write(bytes.Repeat([]byte{'0'}, 2<<20))
	_ = zw.Close()
	in := reader.Input{Artifact: buf.Bytes()}
	if _, err := reader.Verify(context.Background(), in, reader.Options{MaxUnpackedBytes: 1 << 20}); codeOf(err) != reader.CodeArtifactTooLarge {
		t.Errorf("2 MiB unpacked against a 1 MiB bound: %v", err)
	}
	rep, err := reader.Verify(context.Background(), in, reader.Options{MaxUnpackedBytes: 4 << 20})
	if err != nil || rep.Valid || rep.Kind != reader.KindPack || !strings.Contains(rep.Checks[len(rep.Checks)-1].Reason, "MANIFEST") {
		t.Errorf("within the bound, a pack without a manifest: %+v, %v", rep, err)
	}
}
