package clearance

import (
	"bytes"
	"fmt"

	"github.com/clearancehq/clearance/sharelink"
)

// Codes of share links.
const (
	CodeShareLinkInvalid        = sharelink.CodeShareLinkInvalid
	CodeShareLinksNotConfigured = sharelink.CodeShareLinksNotConfigured
	CodeShareLinkExpiry         = sharelink.CodeShareLinkExpiry
)

// Share link limits.
const (
	DefaultShareLinkTTL = sharelink.DefaultShareLinkTTL
	MaxShareLinkTTL     = sharelink.MaxShareLinkTTL
	MinShareSecretLen   = sharelink.MinShareSecretLen
	MaxShareTokenLen    = sharelink.MaxShareTokenLen
	MaxUnsealedCheck    = sharelink.MaxUnsealedCheck
)

// PathPublicDossierVerify is the path prefix of share links.
const PathPublicDossierVerify = sharelink.PathPublicDossierVerify

// The public routes of a share link and what each reveals.
const (
	ShareRouteVerify      = sharelink.RouteVerify
	ShareRouteReproduce   = sharelink.RouteReproduce
	ShareRouteProofBundle = sharelink.RouteProofBundle
	RevealsVerify         = sharelink.RevealsVerify
	RevealsReproduce      = sharelink.RevealsReproduce
	RevealsProofBundle    = sharelink.RevealsProofBundle
)

// Types of share links (package sharelink).
type (
	ShareLink           = sharelink.ShareLink
	ShareLinkOptions    = sharelink.ShareLinkOptions
	SharedURLs          = sharelink.SharedURLs
	SharedURL           = sharelink.SharedURL
	ShareLinkRevocation = sharelink.ShareLinkRevocation
	SharedVerification  = sharelink.SharedVerification
	SharedLedgerCheck   = sharelink.SharedLedgerCheck
	SharedReproduction  = sharelink.SharedReproduction
)

// checkShareSecret refuses a secret too short to key a MAC and keeps the
// engine's own copy.
func (o *Options) checkShareSecret() error {
	if len(o.ShareSecret) == 0 {
		o.ShareSecret = nil
		return nil
	}
	if len(o.ShareSecret) < MinShareSecretLen {
		return fmt.Errorf("clearance: Options.ShareSecret must be at least %d bytes, got %d", MinShareSecretLen, len(o.ShareSecret))
	}
	o.ShareSecret = bytes.Clone(o.ShareSecret)
	return nil
}
