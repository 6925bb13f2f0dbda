package clearance

import (
	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/internal/core"
)

// Principal is an authenticated caller.
type Principal = core.Principal

// RegisteredKey is a registered agent or provider key as the API shows it.
type RegisteredKey = admin.Key

// IssuedKey is a newly created API key; Secret is shown only here.
type IssuedKey = admin.IssuedKey

// CreatedOrg is the result of CreateOrg.
type CreatedOrg = admin.CreatedOrg

// DefaultKeyRevocationInterval is how often RunKeyRevocations rereads the
// grant keys revoked in the store.
const DefaultKeyRevocationInterval = admin.DefaultKeyRevocationInterval
