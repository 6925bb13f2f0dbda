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
)

// PathPublicDossierVerify is the path prefix of share links.
const PathPublicDossierVerify = sharelink.PathPublicDossierVerify

// Types of share links (package sharelink).
type (
	ShareLink           = sharelink.ShareLink
	ShareLinkRevocation = sharelink.ShareLinkRevocation
	SharedVerification  = sharelink.SharedVerification
	SharedLedgerCheck   = sharelink.SharedLedgerCheck
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
