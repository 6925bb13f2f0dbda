package admin

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/tenant"
)

// KeyCacheTTL is how long a server trusts an org or platform key it read
// from the store: a key revoked by another server sharing the database
// stops working here within it (at once on the server that revoked it).
const KeyCacheTTL = time.Second

// cachedKey is a key as read from the store, and when (monotonic).
type cachedKey struct {
	key  tenant.APIKey
	read time.Time
}

// Service administers orgs, their API keys and registered keys, and the
// grant keys revoked in the store. It is safe for concurrent use.
type Service struct {
	d       core.Deps
	apiKeys sync.Map // key hash -> cachedKey
	// forgets counts the revocations this server made: a key read from the
	// store while one was made is not cached (it may be the revoked one,
	// read just before the revocation committed).
	forgets atomic.Uint64
}

// New returns the admin feature over d.
func New(d core.Deps) *Service { return &Service{d: d} }
