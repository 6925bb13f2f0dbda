package escalation

import (
	"context"
	"time"

	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/internal/core"
)

// Config is what the escalation feature needs beside the kernel.
type Config struct {
	// Directory names each org's approval service; nil: none is
	// configured (MANAGED answers 503, evidence is refused).
	Directory approval.Directory
	// Client reaches approval services (approval.NewHTTP over the
	// outbound client).
	Client approval.Service
	// TTL is how long an escalation waits for its approval, counted from
	// the signed intent's issued_at; 0 means DefaultTTL, and it is held
	// between MinTTL and MaxTTL.
	TTL time.Duration
	// Retry is how soon a verification the approval service could not
	// answer is tried again; 0 means DefaultRetry.
	Retry time.Duration
}

// Defaults of Config.
const (
	DefaultTTL   = 15 * time.Minute
	DefaultRetry = 10 * time.Second
	// MaxTTL bounds Config.TTL: an approval request older than a week is
	// not a decision about the action any more.
	MaxTTL = 7 * 24 * time.Hour
	// MinTTL is the shortest Config.TTL: the deadline counts from the
	// intent's issued_at, which may be minutes old (--intent-max-age).
	MinTTL = 10 * time.Minute
)

// Service runs managed escalations. Create it with New, then give it the
// decide feature it concludes escalations with (UseDecide).
type Service struct {
	d      core.Deps
	cfg    Config
	decide *decide.Service
	wake   chan struct{}
}

// New returns the escalation feature over the kernel d.
func New(d core.Deps, cfg Config) *Service {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	cfg.TTL = min(max(cfg.TTL, MinTTL), MaxTTL)
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	return &Service{d: d, cfg: cfg, wake: make(chan struct{}, 1)}
}

// UseDecide gives s the decide feature that evaluates an approved
// escalation's intent again. decide reaches s through decide.Approvals, so
// the two are linked once both exist.
func (s *Service) UseDecide(d *decide.Service) { s.decide = d }

// Configured reports whether approval services are configured at all.
func (s *Service) Configured() bool { return s.cfg.Directory != nil && s.cfg.Client != nil }

// endpoint is the org's approval service.
func (s *Service) endpoint(ctx context.Context, orgID string) (approval.Endpoint, error) {
	if !s.Configured() {
		return approval.Endpoint{}, core.New(core.ErrUnavailable, decide.CodeApprovalServiceNotConfigured, "no approval service is configured")
	}
	ep, err := s.cfg.Directory.Endpoint(ctx, orgID)
	if err != nil {
		return approval.Endpoint{}, &core.Error{Kind: core.ErrUnavailable, Code: decide.CodeApprovalServiceNotConfigured,
			Detail: "no approval service is configured for this organization", Err: err}
	}
	return ep, nil
}

func (s *Service) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
