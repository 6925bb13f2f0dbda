package sharelink_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/sharelink"
)

// wantCode fails unless err is a *clearance.Error with code.
func wantCode(t *testing.T, what string, err error, code string) *clearance.Error {
	t.Helper()
	var ce *clearance.Error
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("%s: want %s, got %v", what, code, err)
	}
	return ce
}

// handMade is a token of dossierID with payload, MACed by x's server.
func (x *shared) handMade(dossierID string, payload []byte) string {
	b64 := base64.RawURLEncoding
	return b64.EncodeToString(payload) + "." + b64.EncodeToString(x.links.MAC(dossierID, payload))
}

func TestVersion1LinksOpenVerifyAndReproduceOnly(t *testing.T) {
	ctx := context.Background()
	x, err := newShared(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	if _, err := x.engine.Audit.SealLedger(ctx, x.orgID); err != nil {
		t.Fatal(err)
	}
	// version 1 | expiry | epoch | org id: no grants byte.
	v1 := make([]byte, 17, 17+len(x.orgID))
	v1[0] = 1
	binary.BigEndian.PutUint64(v1[1:9], uint64(x.now.Unix()+3600))
	v1 = append(v1, x.orgID...)
	l, err := x.links.OpenShareLink(ctx, x.dossierID, x.handMade(x.dossierID, v1))
	if err != nil {
		t.Fatalf("a version 1 link: %v", err)
	}
	if l.ProofBundle || l.URLs.ProofBundle != nil {
		t.Fatalf("a version 1 link opens the proof bundle: %+v", l)
	}
	if v, err := x.links.VerifySharedDossier(ctx, l); err != nil || !v.Verified {
		t.Fatalf("verify through a version 1 link: %+v %v", v, err)
	}
	_, err = x.links.ReproduceSharedDossier(ctx, l)
	wantCode(t, "reproduce through a version 1 link (it promised no policy)", err, sharelink.CodeShareLinkInvalid)
	_, err = x.links.SharedProofPacket(ctx, l)
	wantCode(t, "the proof bundle through a version 1 link", err, sharelink.CodeShareLinkInvalid)

	// Version 2 with a grants bit the server never sets, MAC and all.
	v2 := make([]byte, 18, 18+len(x.orgID))
	v2[0] = 2
	binary.BigEndian.PutUint64(v2[1:9], uint64(x.now.Unix()+3600))
	for _, grants := range []byte{2, 0x80, 0xff} {
		v2[17] = grants
		_, err := x.links.OpenShareLink(ctx, x.dossierID, x.handMade(x.dossierID, append(v2, x.orgID...)))
		wantCode(t, "unknown grants", err, sharelink.CodeShareLinkInvalid)
	}
	// Unknown versions and a payload without an org are refused.
	for _, p := range [][]byte{append([]byte{3}, v2[1:]...), v2[:18], v1[:17]} {
		_, err := x.links.OpenShareLink(ctx, x.dossierID, x.handMade(x.dossierID, p))
		wantCode(t, "malformed payload", err, sharelink.CodeShareLinkInvalid)
	}
	// A link made up by the caller, not opened, opens nothing.
	made := sharelink.ShareLink{DossierID: x.dossierID, OrgID: x.orgID, ProofBundle: true}
	_, err = x.links.ReproduceSharedDossier(ctx, made)
	wantCode(t, "an unopened link reproducing", err, sharelink.CodeShareLinkInvalid)
	_, err = x.links.SharedProofPacket(ctx, made)
	wantCode(t, "an unopened link's proof bundle", err, sharelink.CodeShareLinkInvalid)
}

func TestPublicErrorsNameNothing(t *testing.T) {
	secret := "policy acme-secret-v9 (sha256:abcd) of intent amount=5000"
	for _, code := range []string{policies.CodeRecordedPolicyUnavailable, policies.CodeNotReplayable, clearance.CodeEntryNotYetSealed} {
		err := sharelink.PublicError(core.New(core.ErrConflict, code, "%s", secret))
		ce := wantCode(t, code, err, code)
		if !errors.Is(err, core.ErrConflict) || strings.Contains(ce.Detail, "acme") || strings.Contains(ce.Detail, "5000") || ce.Detail == "" {
			t.Errorf("%s: %+v", code, ce)
		}
	}
	wantCode(t, "a dossier that is gone", sharelink.PublicError(core.New(core.ErrNotFound, core.CodeDossierNotFound, "dossier not found")),
		sharelink.CodeShareLinkInvalid)
	odd := sharelink.PublicError(core.Invalid(clearance.CodeProofRange, "seq", "seq must be 1 to %d in org %s", 3, "acme"))
	if ce := wantCode(t, "another refusal", odd, clearance.CodeProofRange); !errors.Is(odd, core.ErrInvalidRequest) || strings.Contains(ce.Detail, "acme") {
		t.Errorf("another refusal: %+v", ce)
	}
	if err := sharelink.PublicError(errors.New("disk on fire")); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("a store failure: %v", err)
	}
}

func TestVerifyRefusesToWalkFarBeyondTheCheckpoint(t *testing.T) {
	x := newLongLedger(t, 0)
	x.seal(t)
	x.fill(t, sharelink.MaxUnsealedCheck)
	x.decide(t)
	l, err := x.engine.ShareLinks.OpenShareLink(context.Background(), x.link.DossierID, x.link.Sig)
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.engine.ShareLinks.VerifySharedDossier(context.Background(), l)
	if ce := wantCode(t, "an entry far past the checkpoint", err, clearance.CodeEntryNotYetSealed); !errors.Is(err, core.ErrConflict) {
		t.Fatalf("%+v", ce)
	}
	x.seal(t)
	if v := x.verify(t); !v.Verified || !v.Ledger.Checkpointed {
		t.Fatalf("once sealed: %+v", v)
	}
}

func TestVerifyWithoutALedgerKeyWalksFromGenesis(t *testing.T) {
	x := newLedgerWith(t, 50, false)
	x.counts.reset()
	v := x.verify(t)
	if !v.Verified || v.Ledger.Checkpointed || v.Ledger.AnchoredCheckpointValid != nil || !v.Ledger.ChainValid || v.Ledger.CheckpointTreeSize != 0 {
		t.Fatalf("without a ledger key: %+v", v)
	}
	if got := x.counts.entries.Load(); got != int64(x.seq)+1 {
		t.Fatalf("read %d entries, want the %d of the prefix and the entry again", got, x.seq)
	}
}
