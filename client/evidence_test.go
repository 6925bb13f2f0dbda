package client_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/capsule"
	"github.com/clearancehq/clearance/client"
)

// A decision's evidence: its dossier three ways, its reproduction, its
// chain, its overrides.
func TestDossierEvidence(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Evidence")
	o.publish(t, bandsBundle)
	ctx := t.Context()
	d := o.decide(t, 2000, client.WithCorrelationID("ticket-1"))
	follow := o.decide(t, 50, client.WithCorrelationID("ticket-1"))
	dossierID := d.DossierId.String()

	byDecision, err := o.c.DossierByDecision(ctx, d.DecisionId.String())
	if err != nil || byDecision.DossierId != d.DossierId || byDecision.Outcome != "ESCALATE" || !slices.Equal(byDecision.MatchedRules, []string{"esc"}) {
		t.Fatalf("dossier by decision %+v: %v", byDecision, err)
	}
	dossier, err := o.c.Dossier(ctx, dossierID)
	if err != nil || dossier.DecisionId != d.DecisionId || dossier.LedgerSeq != d.LedgerSeq || *dossier.CorrelationId != "ticket-1" {
		t.Fatalf("dossier %+v: %v", dossier, err)
	}
	var got client.Response
	raw, err := o.c.DossierJSON(ctx, dossierID, client.Received(&got))
	sum := sha256.Sum256(raw)
	if err != nil || "sha256:"+hex.EncodeToString(sum[:]) != d.DossierDigest || got.Header.Get("X-Clearance-Dossier-Digest") != d.DossierDigest {
		t.Fatalf("the dossier's bytes do not hash to its digest %s: %v", d.DossierDigest, err)
	}
	explained, err := o.c.ExplainDossier(ctx, dossierID)
	if err != nil || explained.Dossier.DossierId != d.DossierId || len(explained.Explanation.Rules) != 2 {
		t.Fatalf("explained dossier %+v: %v", explained, err)
	}
	repro, err := o.c.ReproduceDossier(ctx, dossierID)
	if err != nil || !repro.Matches || repro.Recorded.Outcome != "ESCALATE" || repro.Reproduced.Outcome != "ESCALATE" {
		t.Fatalf("reproduce %+v: %v", repro, err)
	}

	chain, err := o.c.DecisionChain(ctx, o.ID, d.ChainId.String())
	if err != nil || chain.Count != 2 || chain.Members[0].DecisionId != d.DecisionId || chain.Head.DecisionId != follow.DecisionId {
		t.Fatalf("chain %+v: %v", chain, err)
	}
	byEval, err := o.c.DecisionChainByEvaluation(ctx, o.ID, follow.EvaluationId.String())
	if err != nil || byEval.ChainId != chain.ChainId || byEval.Count != 2 {
		t.Fatalf("chain by evaluation %+v: %v", byEval, err)
	}
	_, err = o.c.DecisionChain(ctx, "01900000-0000-7000-8000-000000000000", d.ChainId.String())
	wantCode(t, err, http.StatusForbidden, "ORG_MISMATCH")

	req := client.OverrideRequest{Resolution: "APPROVED", Actor: client.OverrideActor{Id: "ops-lead", Type: "human"}, Note: ptr("checked the order")}
	ov, err := o.c.RecordOverride(ctx, dossierID, req, client.WithIdempotencyKey("override-1"))
	if err != nil || ov.DossierId != d.DossierId || ov.Resolution != "APPROVED" || ov.DecisionOutcome != "ESCALATE" {
		t.Fatalf("override %+v: %v", ov, err)
	}
	again, err := o.c.RecordOverride(ctx, dossierID, req, client.WithIdempotencyKey("override-1"))
	if err != nil || again.OverrideId != ov.OverrideId {
		t.Fatalf("the same override again %+v: %v", again, err)
	}
	trail, err := o.c.Overrides(ctx, dossierID)
	if err != nil || len(trail.Overrides) != 1 || trail.Overrides[0].OverrideId != ov.OverrideId || trail.Outcome != "ESCALATE" {
		t.Fatalf("trail %+v: %v", trail, err)
	}
	_, err = o.c.RecordOverride(ctx, follow.DossierId.String(), req)
	wantCode(t, err, http.StatusConflict, "OVERRIDE_NOT_APPLICABLE")
}

// The ledger, its checkpoints and proofs, and what is built on them: proof
// packets, capsules, share links and the reader.
func TestLedgerAndProofs(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Ledger")
	o.publish(t, bandsBundle)
	ctx := t.Context()
	public := s.client("")

	// A grant that was claimed, dispatched and finalized.
	g := s.bind(o, 100)
	claim, err := o.c.Claim(ctx, client.ExecutionClaimTokenRequest{ExecutionToken: *g.ExecutionToken, IntentHash: g.IntentHash})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.c.RecordDispatch(ctx, client.DispatchRequest{GrantId: g.GrantId, ClaimToken: claim.ClaimToken,
		RequestDigest: "sha256:" + strings.Repeat("cd", 32), Target: "https://psp.example/v1/refunds", DispatchedAt: s.now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.c.Finalize(ctx, client.ExecutionFinalizeRequest{ExecutionToken: *g.ExecutionToken, ClaimToken: claim.ClaimToken, Outcome: "COMMITTED"}); err != nil {
		t.Fatal(err)
	}
	dossierID := g.DossierId.String()
	dispatches, err := o.c.Dispatches(ctx, dossierID)
	if err != nil || len(dispatches.Dispatches) != 1 || *dispatches.GrantId != *g.GrantId || *dispatches.GrantState != "COMMITTED" {
		t.Fatalf("dispatches %+v: %v", dispatches, err)
	}

	page, err := o.c.Ledger(ctx, client.Query("limit", "2"))
	if err != nil || len(page.Entries) != 2 || page.Entries[0].Seq != 1 || page.NextAfterSeq == nil || page.Head.Seq < 5 {
		t.Fatalf("ledger page %+v: %v", page, err)
	}
	rest, err := o.c.Ledger(ctx, client.Query("after_seq", "2"))
	if err != nil || int64(len(rest.Entries)) != page.Head.Seq-2 || rest.Entries[0].Seq != 3 {
		t.Fatalf("ledger after 2 %+v: %v", rest, err)
	}
	report, err := o.c.VerifyLedger(ctx)
	if err != nil || !report.Valid || report.EntriesChecked != page.Head.Seq {
		t.Fatalf("verify ledger %+v: %v", report, err)
	}
	sealed, err := o.c.SealLedger(ctx)
	if err != nil || sealed.TreeSize != page.Head.Seq || sealed.Checkpoint == "" {
		t.Fatalf("seal %+v: %v", sealed, err)
	}
	key, err := public.LedgerKey(ctx)
	if err != nil || key != sealed.VerifierKey || !strings.HasPrefix(key, "clearance-client-test-ledger+") {
		t.Fatalf("ledger key %q (checkpoint's %q): %v", key, sealed.VerifierKey, err)
	}
	latest, err := o.c.LedgerCheckpoint(ctx)
	if err != nil || latest.TreeSize != sealed.TreeSize || latest.RootHash != sealed.RootHash {
		t.Fatalf("latest checkpoint %+v: %v", latest, err)
	}
	at, err := o.c.LedgerCheckpointAt(ctx, sealed.TreeSize)
	if err != nil || at.Checkpoint != sealed.Checkpoint {
		t.Fatalf("checkpoint at %d %+v: %v", sealed.TreeSize, at, err)
	}
	incl, err := o.c.InclusionProof(ctx, 1, sealed.TreeSize)
	if err != nil || incl.Seq != 1 || incl.TreeSize != sealed.TreeSize || len(incl.Proof) == 0 {
		t.Fatalf("inclusion proof %+v: %v", incl, err)
	}
	o.decide(t, 10)
	grown, err := o.c.SealLedger(ctx)
	if err != nil || grown.TreeSize != sealed.TreeSize+1 {
		t.Fatalf("seal again %+v: %v", grown, err)
	}
	cons, err := o.c.ConsistencyProof(ctx, sealed.TreeSize, grown.TreeSize)
	if err != nil || cons.OldSize != sealed.TreeSize || cons.NewSize != grown.TreeSize || cons.OldCheckpoint != sealed.Checkpoint {
		t.Fatalf("consistency proof %+v: %v", cons, err)
	}

	// The proof packet, checked by the public reader.
	packet, err := o.c.ProofPacket(ctx, o.ID, dossierID)
	if err != nil || packet.DossierId != dossierID || packet.DossierDigest != g.DossierDigest || packet.LedgerVerifierKey != key {
		t.Fatalf("proof packet %+v: %v", packet, err)
	}
	packetJSON, err := json.Marshal(packet)
	if err != nil {
		t.Fatal(err)
	}
	verdict, err := public.ReaderVerify(ctx, client.ReaderVerifyRequest{ArtifactBase64: &packetJSON})
	if err != nil || !verdict.Valid || verdict.Kind != "packet" || verdict.Key.Source != "server" {
		t.Fatalf("reader on the packet %+v: %v", verdict, err)
	}
	tampered := bytes.Replace(packetJSON, []byte(`"outcome":"ALLOW"`), []byte(`"outcome":"BLOCK"`), 1)
	if bytes.Equal(tampered, packetJSON) {
		t.Fatal("the packet was not changed")
	}
	if verdict, err := public.ReaderVerify(ctx, client.ReaderVerifyRequest{ArtifactBase64: &tampered}); err != nil || verdict.Valid {
		t.Fatalf("reader on a changed packet %+v: %v", verdict, err)
	}
	page2, err := public.ReaderPage(ctx)
	if err != nil || !bytes.Contains(page2, []byte("<html")) || !bytes.Contains(page2, []byte("/v1/reader/verify")) {
		t.Fatalf("reader page: %v\n%.300s", err, page2)
	}

	// The capsule and its producer envelopes.
	var capsuleHeaders client.Response
	caps, err := o.c.AgentActionCapsule(ctx, o.ID, dossierID, client.Received(&capsuleHeaders))
	if err != nil || !capsule.Verify(caps).OK || capsuleHeaders.Header.Get("X-Clearance-Class1-Verified") != "true" {
		t.Fatalf("capsule (%v): %v\n%s", capsuleHeaders.Header, err, caps)
	}
	var capsuleID struct {
		ID string `json:"capsule_id"`
	}
	if err := json.Unmarshal(caps, &capsuleID); err != nil {
		t.Fatal(err)
	}
	envs, err := o.c.ProducerEnvelopes(ctx, o.ID, dossierID)
	if err != nil || envs.CapsuleId != capsuleID.ID || len(envs.Envelopes) == 0 || len(envs.Envelopes[0].CoseSign1) == 0 {
		t.Fatalf("producer envelopes %+v: %v", envs, err)
	}

	// Share links, public, until revoked.
	link, err := o.c.CreateShareLink(ctx, dossierID, client.ShareLinkRequest{ProofBundle: ptr(true), ExpiresInSeconds: ptr(600)})
	if err != nil || link.DossierId != dossierID || link.Sig == "" || !link.ProofBundle || link.Urls.ProofBundle == nil {
		t.Fatalf("share link %+v: %v", link, err)
	}
	shared, err := public.SharedVerification(ctx, dossierID, link.Sig)
	if err != nil || !shared.Verified || !shared.RecomputedDigestMatches || shared.DossierDigest != g.DossierDigest || shared.Outcome != "ALLOW" {
		t.Fatalf("shared verification %+v: %v", shared, err)
	}
	reproduced, err := public.SharedReproduction(ctx, dossierID, link.Sig)
	if err != nil || !reproduced.Matches || reproduced.RecordedOutcome != "ALLOW" || reproduced.ReproducedOutcome != "ALLOW" {
		t.Fatalf("shared reproduction %+v: %v", reproduced, err)
	}
	bundle, err := public.SharedProofBundle(ctx, dossierID, link.Sig)
	if err != nil || bundle.DossierDigest != g.DossierDigest || bundle.ProofBundle.Signature == "" {
		t.Fatalf("shared proof bundle %+v: %v", bundle, err)
	}
	rev, err := o.c.RevokeShareLinks(ctx)
	if err != nil || rev.Epoch != 1 {
		t.Fatalf("revoke share links %+v: %v", rev, err)
	}
	_, err = public.SharedVerification(ctx, dossierID, link.Sig)
	wantCode(t, err, http.StatusNotFound, "SHARE_LINK_INVALID")
}
