package sharelink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/clearancehq/clearance/proof"
	"github.com/clearancehq/clearance/sharelink"
)

// An org shares one dossier for an hour. Whoever holds the link learns the
// outcome and that the dossier is intact in the org's ledger, and nothing
// else; after the hour the link is refused like any invalid one.
func ExampleService_CreateShareLink() {
	ctx := context.Background()
	x, err := newShared(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.close()

	l, err := x.links.CreateShareLink(ctx, x.orgID, x.dossierID, sharelink.ShareLinkOptions{TTL: time.Hour})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("public path:", strings.HasPrefix(l.URL, sharelink.PathPublicDossierVerify), "expires:", l.ExpiresAt)
	fmt.Println("checked:", x.check(ctx, l))

	x.now = x.now.Add(time.Hour)
	fmt.Println("an hour later:", x.check(ctx, l))
	// Output:
	// public path: true expires: 2026-11-01T13:00:00Z
	// checked: BLOCK SHADOW verified: true (ledger entry 3)
	// an hour later: SHARE_LINK_INVALID
}

// Revoking moves the org's share epoch on: every link made before stops
// verifying at once, and links made afterwards verify.
func ExampleService_RevokeShareLinks() {
	ctx := context.Background()
	x, err := newShared(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.close()

	before, err := x.links.CreateShareLink(ctx, x.orgID, x.dossierID, sharelink.ShareLinkOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	rev, err := x.links.RevokeShareLinks(ctx, x.orgID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("share epoch:", rev.Epoch, "revoked at", rev.RevokedAt)
	fmt.Println("link made before:", x.check(ctx, before))

	after, err := x.links.CreateShareLink(ctx, x.orgID, x.dossierID, sharelink.ShareLinkOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("link made after:", x.check(ctx, after))
	// Output:
	// share epoch: 1 revoked at 2026-11-01T12:00:00Z
	// link made before: SHARE_LINK_INVALID
	// link made after: BLOCK SHADOW verified: true (ledger entry 3)
}

// The same link answers whether the decision reproduces: the recorded
// intent evaluated again under the recorded policy. The holder learns the
// outcomes and which policy, never its rules, the intent or the reasons.
func ExampleService_ReproduceSharedDossier() {
	ctx := context.Background()
	x, err := newShared(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.close()

	l, err := x.links.CreateShareLink(ctx, x.orgID, x.dossierID, sharelink.ShareLinkOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("reproduce path:", strings.HasSuffix(strings.Split(l.URLs.Reproduce.URL, "?")[0], "/"+sharelink.RouteReproduce))
	opened, err := x.links.OpenShareLink(ctx, l.DossierID, l.Sig)
	if err != nil {
		fmt.Println(err)
		return
	}
	r, err := x.links.ReproduceSharedDossier(ctx, opened)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("recorded:", r.RecordedOutcome, "reproduced:", r.ReproducedOutcome, "matches:", r.Matches)
	fmt.Println("policy:", r.PolicyVersion)
	// Output:
	// reproduce path: true
	// recorded: BLOCK reproduced: BLOCK matches: true
	// policy: starter-1
}

// A link made with ProofBundle also serves the dossier's proof packet,
// dossier included, which anyone verifies offline with the ledger key. A
// default link does not open it.
func ExampleService_SharedProofPacket() {
	ctx := context.Background()
	x, err := newShared(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.close()
	// The packet anchors the dossier in a signed checkpoint: the sealer
	// signs one within a second; here, at once.
	if _, err := x.engine.Audit.SealLedger(ctx, x.orgID); err != nil {
		fmt.Println(err)
		return
	}

	l, err := x.links.CreateShareLink(ctx, x.orgID, x.dossierID, sharelink.ShareLinkOptions{ProofBundle: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("reveals:", l.URLs.ProofBundle.Reveals == sharelink.RevealsProofBundle)
	opened, err := x.links.OpenShareLink(ctx, l.DossierID, l.Sig)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := x.links.SharedProofPacket(ctx, opened)
	if err != nil {
		fmt.Println(err)
		return
	}
	raw, err := json.Marshal(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	res := proof.Verify(raw, x.engine.Audit.LedgerVerifierKey())
	fmt.Println("dossier:", p.DossierID == x.dossierID, "verifies offline:", res.Valid)

	plain, err := x.links.CreateShareLink(ctx, x.orgID, x.dossierID, sharelink.ShareLinkOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("default link lists it:", plain.URLs.ProofBundle != nil)
	fmt.Println("default link:", x.proofBundle(ctx, plain))
	// Output:
	// reveals: true
	// dossier: true verifies offline: true
	// default link lists it: false
	// default link: SHARE_LINK_INVALID
}
