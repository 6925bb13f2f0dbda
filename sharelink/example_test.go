package sharelink_test

import (
	"context"
	"fmt"
	"strings"
	"time"

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
