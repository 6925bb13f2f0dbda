package admin

import (
	"sync"

	"github.com/clearancehq/clearance/internal/core"
)

// Service administers orgs, their API keys and registered keys, and the
// grant keys revoked in the store. It is safe for concurrent use.
type Service struct {
	d       core.Deps
	apiKeys sync.Map // key hash -> tenant.APIKey: keys are immutable once issued
}

// New returns the admin feature over d.
func New(d core.Deps) *Service { return &Service{d: d} }
