package clearance

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/analytics"
	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/audit"
	"github.com/clearancehq/clearance/checkout"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/connector"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/escalation"
	"github.com/clearancehq/clearance/evidence"
	"github.com/clearancehq/clearance/execution"
	"github.com/clearancehq/clearance/export"
	"github.com/clearancehq/clearance/federation"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/outbound"
	"github.com/clearancehq/clearance/internal/secretbox"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/onboarding"
	"github.com/clearancehq/clearance/outbox"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/policysource"
	"github.com/clearancehq/clearance/privacy"
	"github.com/clearancehq/clearance/sharelink"
	"github.com/clearancehq/clearance/signals"
	"github.com/clearancehq/clearance/spend"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/webhook"
)

// Version is the Clearance release this build reports.
const Version = "0.1.0"

// InterfaceVersion is the version of the service interface this build
// implements; it moves with the interface, Version with our releases.
const InterfaceVersion = "0.5.0"

// timeFormat is how Clearance writes timestamps: RFC 3339, UTC, nanoseconds.
const timeFormat = core.TimeFormat

// Options configure an Engine. The zero value is a good default.
type Options struct {
	// Now is the engine's clock; nil means time.Now.
	Now func() time.Time
	// Rand supplies randomness for ids and keys; nil means crypto/rand.
	Rand io.Reader
	// Logger receives operational events; nil discards them.
	Logger *slog.Logger
	// GrantKeys signs grants, claim attestations and verification
	// envelopes; nil means signing is not configured (execution routes
	// answer 503 and the JWKS 404). It is the ring the Engine starts with:
	// Engine.SetGrantKeys replaces it while the Engine runs.
	GrantKeys *grant.KeyRing
	// ProducerKey signs the COSE producer envelopes of Agent Action
	// Capsules; the zero Key means the active grant key.
	ProducerKey grant.Key
	// LedgerKey signs the checkpoints of every org's ledger (C2SP signed
	// notes); nil means checkpoints and proofs answer 503.
	LedgerKey *ledger.Key
	// Issuer is the iss of every token; "" means "clearance".
	Issuer string
	// GrantTTL is a grant's lifetime; 0 means 120 s.
	GrantTTL time.Duration
	// ClaimLease is a claim's lease; 0 means 30 s, and less than a second
	// means one second. A lease ends on a whole second (the claim
	// attestation's exp is exactly its end), so it runs up to a second
	// shorter than ClaimLease.
	ClaimLease time.Duration
	// ShareSecret keys the MACs of dossier share links (at least
	// MinShareSecretLen bytes); nil means share links cannot be created
	// (503 SHARE_LINKS_NOT_CONFIGURED) and none verifies.
	ShareSecret []byte
	// ExportSecret keys the HMAC of validation packs: each org's packs are
	// signed with pack.OrgKey(ExportSecret, orgID); nil means packs are
	// built without bundle_signature_hmac_sha256.
	ExportSecret []byte
	// ExportWorker tunes the validation-pack worker that Run starts; the
	// zero value is a good default.
	ExportWorker export.WorkerOptions
	// ReplayInlineLimit is the most recorded decisions a policy replay
	// answers at once; a larger window is queued as a job the replay
	// worker runs. 0 means policies.InlineReplayLimit (10,000).
	ReplayInlineLimit int
	// PolicySourceRoots are the directories under which an org may link a
	// local Git repository as its policy source; nil allows remote
	// repositories only (https, or any URL with AllowPrivateDestinations).
	PolicySourceRoots []string
	// MaxClockSkew is how far ahead of the engine's clock a timestamp
	// may be: a signed intent's issued_at (INTENT_NOT_YET_VALID) or a
	// grant token's iat (GRANT_INVALID); and how far the engine's clock
	// may be off the store's when it issues a grant (503 CLOCK_SKEW: the
	// store judges the grant's expiry by its own clock); 0 means
	// DefaultMaxClockSkew.
	MaxClockSkew time.Duration
	// IntentMaxAge is how old a signed intent's issued_at may be; 0 means
	// DefaultIntentMaxAge.
	IntentMaxAge time.Duration
	// MaxJSONMembers bounds the members of any one JSON object decoded from
	// a request (bodies, signed intents, policy bundles); 0 means
	// DefaultMaxJSONMembers.
	MaxJSONMembers int
	// MaxJSONElements bounds the elements of any one JSON array decoded
	// from a request; 0 means DefaultMaxJSONElements.
	MaxJSONElements int

	// ApprovalServices names each org's approval service (managed
	// escalations and approval evidence); nil means none: escalation.mode
	// MANAGED answers 503 APPROVAL_SERVICE_NOT_CONFIGURED and approval
	// evidence is refused.
	ApprovalServices approval.Directory
	// ApprovalClient reaches approval services; nil means approval.NewHTTP
	// over the outbound client (TLS, no redirects, SSRF guard).
	ApprovalClient approval.Service
	// AllowPrivateDestinations lets outbound calls reach loopback, private
	// and link-local addresses: development and tests on one machine only.
	AllowPrivateDestinations bool
	// EscalationTTL is how long a managed escalation waits for its
	// approval; 0 means escalation.DefaultTTL.
	EscalationTTL time.Duration
	// SecretsKey seals the secrets Clearance must use again (callback
	// signing secrets, signature-checking connector secrets) at rest with
	// AES-256-GCM (at least secretbox.MinKeyLen bytes). Servers sharing a
	// database need the same key. nil means such secrets cannot be stored:
	// the routes that take one answer 503 SECRETS_NOT_CONFIGURED.
	SecretsKey []byte
	// Webhooks tunes the delivery of events to WEBHOOK integrations; the
	// zero value is a good default.
	Webhooks webhook.WorkerOptions
	// Mailer sends sign-up codes; nil means sign-up answers 503
	// MAIL_NOT_CONFIGURED. The server uses a mailbox of .eml files in its
	// data directory unless it is given an SMTP URL (NewMailer).
	Mailer Mailer
	// Onboarding tunes sign-up (code and grant lifetimes, tries, sends);
	// the zero value is the documented defaults.
	Onboarding OnboardingOptions
	// ReportingKey signs the platform's growth reports (blast-radius
	// aggregates), a key of their own; the zero Key means none: a new
	// report answers 503 REPORTING_KEY_NOT_CONFIGURED.
	ReportingKey grant.Key
	// TracerProvider receives the engine's OpenTelemetry spans: policy
	// evaluation, store commits (of a store.Observable backend) and
	// signing, each a child of the span in the caller's context. nil means
	// no spans at no cost; pass otel.GetTracerProvider() for the global
	// one.
	TracerProvider trace.TracerProvider
}

// Defaults of Options. DefaultMaxClockSkew is the clock skew tolerated
// between Clearance and the parties whose timestamps it checks.
const (
	DefaultMaxClockSkew    = 60 * time.Second
	DefaultIntentMaxAge    = 5 * time.Minute
	DefaultMaxJSONMembers  = strictjson.DefaultMaxMembers
	DefaultMaxJSONElements = strictjson.DefaultMaxElements
)

func (o *Options) ensureDefaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Issuer == "" {
		o.Issuer = DefaultIssuer
	}
	if o.GrantTTL <= 0 {
		o.GrantTTL = DefaultGrantTTL
	}
	if o.ClaimLease <= 0 {
		o.ClaimLease = DefaultClaimLease
	}
	if o.ClaimLease < claim.MinLease {
		o.ClaimLease = claim.MinLease
	}
	if o.MaxClockSkew <= 0 {
		o.MaxClockSkew = DefaultMaxClockSkew
	}
	if o.IntentMaxAge <= 0 {
		o.IntentMaxAge = DefaultIntentMaxAge
	}
	if o.MaxJSONMembers <= 0 {
		o.MaxJSONMembers = DefaultMaxJSONMembers
	}
	if o.MaxJSONElements <= 0 {
		o.MaxJSONElements = DefaultMaxJSONElements
	}
}

// JSONLimits returns the bounds of decoded JSON (Options.MaxJSONMembers and
// MaxJSONElements, defaults applied), for a server that decodes request
// bodies before handing them to the engine.
func (e *Engine) JSONLimits() (members, elements int) {
	return e.opts.MaxJSONMembers, e.opts.MaxJSONElements
}

// decodeOptions are the strict decoding options of request JSON.
func (e *Engine) decodeOptions() strictjson.Options { return e.deps.JSON }

// Engine is Clearance's in-process API. Create it with Open.
type Engine struct {
	// Audit answers for the ledgers: pages, verification, checkpoints, proofs.
	Audit *audit.Service

	store core.Store // the backend, refusing unknown orgs and marking which ledgers grew
	deps  core.Deps
	opts  Options
	keys  *core.Keys // grant key ring in use with the kids revoked in the store

	commits commitObservers // ObserveStoreCommits

	// Admin: orgs, API keys, registered keys and grant key revocations.
	Admin *admin.Service
	// Policies publishes, stages and activates bundles and resolves them.
	Policies *policies.Service
	// PolicySources links an org's Git repository as its policy source and
	// pulls it: compiled, tested, published as a draft or a version.
	PolicySources *policysource.Service
	// Decide makes decisions: Evaluate and EnforceAndBind.
	Decide *decide.Service
	// Evidence reads and extends the evidence of decisions.
	Evidence *evidence.Service
	// ShareLinks makes, verifies and revokes dossier share links.
	ShareLinks *sharelink.Service
	// Execution claims, finalizes and reconciles grants.
	Execution *execution.Service
	// Exports queues, builds and serves validation packs.
	Exports *export.Service
	// Escalations runs managed escalations and verifies approvals with
	// the approval services.
	Escalations *escalation.Service
	// Webhooks connects WEBHOOK integrations and delivers the org's events
	// to them.
	Webhooks *webhook.Service
	// Signals runs inbound signal connectors and stores what they deliver,
	// which policies read when they decide and claims read again.
	Signals *signals.Service
	// Spend keeps the budgets of the policies' spend-control gates.
	Spend *spend.Service
	// Privacy keeps dossiers' personal data sealed under per-subject keys
	// for orgs that opt in, and erases data subjects (crypto-shredding).
	Privacy *privacy.Service
	// Onboarding signs owners up by e-mail code and issues their orgs'
	// deployment bundles.
	Onboarding *onboarding.Service
	// Connector connects automation platforms to a workspace (OAuth 2.0
	// authorization code with PKCE) and delivers decision.resolved to the
	// callback URLs they register.
	Connector *connector.Service
	// Checkout authorizes UCP checkout completions and binds each to an
	// exact-action grant.
	Checkout *checkout.Service
	// Analytics is the platform operator's: consent, growth
	// classification, the scorecard and signed monthly reports.
	Analytics *analytics.Service
	// Federation issues federated decision envelopes of the org's
	// decisions and keeps the org's trust list of other deployments whose
	// envelopes its policies may see.
	Federation *federation.Service
}

// Open returns an Engine over backend. The Engine does not own the backend:
// close the backend after the Engine is no longer used.
func Open(backend store.Backend, opts Options) (*Engine, error) {
	if backend == nil {
		return nil, errors.New("clearance: Open needs a storage backend")
	}
	opts.ensureDefaults()
	if err := opts.checkShareSecret(); err != nil {
		return nil, err
	}
	var secrets *secretbox.Box
	if opts.SecretsKey != nil {
		var err error
		if secrets, err = secretbox.New(opts.SecretsKey); err != nil {
			return nil, fmt.Errorf("clearance: Options.SecretsKey: %w", err)
		}
	}
	st := core.NewStore(backend)
	keys := core.NewKeys(opts.GrantKeys)
	deps := core.Deps{
		Store: st, Clock: core.Clock(opts.Now), IDs: core.IDs{Rand: opts.Rand}, Logger: opts.Logger,
		Keys: keys, Issuer: opts.Issuer, LedgerKey: opts.LedgerKey, MaxClockSkew: opts.MaxClockSkew, Secrets: secrets,
		JSON:   strictjson.Options{RejectUnknown: true, MaxMembers: opts.MaxJSONMembers, MaxElements: opts.MaxJSONElements},
		Tracer: core.NewTracer(opts.TracerProvider),
	}
	e := &Engine{store: st, deps: deps, opts: opts, keys: keys, Admin: admin.New(deps), Audit: audit.New(deps)}
	if deps.Tracer.On() {
		e.observeCommits()
	}
	e.Policies = policies.New(deps, policies.Config{ReplayInlineLimit: opts.ReplayInlineLimit})
	out := outbound.New(outbound.Options{AllowPrivate: opts.AllowPrivateDestinations})
	e.PolicySources = policysource.New(deps, policysource.Config{Policies: e.Policies, Client: out, LocalRoots: opts.PolicySourceRoots})
	client := opts.ApprovalClient
	if client == nil {
		client = approval.NewHTTP(out, approval.HTTPOptions{})
	}
	e.Webhooks = webhook.New(deps, webhook.Config{Client: out, Worker: opts.Webhooks,
		Render: func(ctx context.Context, ev outbox.Event) ([]byte, error) { return e.Decide.EventBody(ctx, ev) }})
	e.Escalations = escalation.New(deps, escalation.Config{Directory: opts.ApprovalServices, Client: client, TTL: opts.EscalationTTL})
	var approvals decide.Approvals
	var claimApprovals execution.Approvals
	if opts.ApprovalServices != nil {
		approvals, claimApprovals = e.Escalations, e.Escalations
	}
	e.Signals = signals.New(deps)
	e.Policies.UseSignals(e.Signals)
	e.Spend = spend.New(deps)
	e.Privacy = privacy.New(deps, privacy.Config{})
	e.Policies.UsePersonal(e.Privacy.OpenRecordedFor)
	e.Federation = federation.New(deps, federation.Config{Client: out, RecordedInput: federationRecordedInput})
	e.Decide = decide.New(deps, decide.Config{Policies: e.Policies, StillActive: policies.StillActive,
		GrantTTL: opts.GrantTTL, IntentMaxAge: opts.IntentMaxAge, Approvals: approvals, Events: e.Webhooks.Wake,
		Signals: e.Signals, Spend: e.Spend, Personal: e.Privacy, Federation: e.Federation})
	e.Escalations.UseDecide(e.Decide)
	e.Evidence = evidence.New(deps, evidence.Config{Audit: e.Audit, ProducerKey: opts.ProducerKey, Escalation: e.Escalations.Capsule})
	e.ShareLinks = sharelink.New(deps, sharelink.Config{Secret: opts.ShareSecret, Evidence: e.Evidence, Policies: e.Policies})
	e.Checkout = checkout.New(deps, checkout.Config{Decide: e.Decide})
	e.Policies.UseCheckouts(checkout.RecordedInput)
	e.Analytics = analytics.New(deps, analytics.Config{ReportingKey: opts.ReportingKey})
	e.Execution = execution.New(deps, execution.Config{Policies: e.Policies, StillActive: policies.StillActive,
		ClaimLease: opts.ClaimLease, Approvals: claimApprovals, Signals: e.Signals, Checkouts: e.Checkout,
		Spend: e.Spend, Federation: e.Federation, Personal: e.Privacy})
	e.Exports = export.New(deps, export.Config{Ledger: e.Audit, Secret: opts.ExportSecret})
	ob := opts.Onboarding
	ob.Mailer, ob.Admin, ob.Signals = opts.Mailer, e.Admin, e.Signals
	ob.PolicyVersion = func(ctx context.Context, orgID string) (string, error) {
		r, err := e.Policies.Resolve(ctx, orgID, "")
		if err != nil {
			return "", err
		}
		return r.Active.Snapshot().PolicyVersion, nil
	}
	ob.InstallStarter = e.Policies.InstallStarter
	e.Onboarding = onboarding.New(deps, ob)
	e.Connector = connector.New(deps, connector.Config{Accounts: e.Onboarding, Admin: e.Admin,
		InstallStarter: e.Policies.InstallStarter, Webhooks: e.Webhooks})
	return e, nil
}

// SetGrantKeys replaces the grant key ring while the Engine runs, e.g. after
// a rotation or a revocation was written to the key file. Every operation
// that starts afterwards signs with the new active key and verifies against
// the new ring (a key no longer in it, or revoked, verifies nothing); the
// JWKS follows. An operation already under way finishes with the ring it
// started with. nil turns signing off. Kids revoked in the store
// (Admin.RevokeGrantKey) stay refused whatever r holds.
func (e *Engine) SetGrantKeys(r *grant.KeyRing) { e.keys.SetRing(r) }

// GrantKeys returns the grant key ring in use; nil when signing is not
// configured.
func (e *Engine) GrantKeys() *grant.KeyRing { return e.keys.Ring() }

// Health reports whether the store answers and accepts writes, and whether
// the active grant key may sign.
type Health struct {
	Status string `json:"status"` // "ok" or "degraded"
	// Store is "ok", the error of a store that does not answer, or why it
	// refuses writes (StoreStatus.Reason).
	Store       string      `json:"store"`
	StoreStatus StoreStatus `json:"store_status"`
	// GrantKey is "revoked" when the active grant key is revoked in the
	// store (the server signs nothing: degraded); absent otherwise.
	GrantKey         string `json:"grant_key,omitempty"`
	Version          string `json:"version"`
	InterfaceVersion string `json:"interface_version"`
}

// StoreStatus is the store's condition in Health.
type StoreStatus struct {
	// Status is StoreOK, StoreUnavailable (it does not answer) or
	// StoreFailing (it refuses writes and serves what it can still read).
	Status string `json:"status"`
	// Kind is a store fault kind (store.FaultDiskFull, FaultWrite,
	// FaultRead, FaultCorruption) when failing.
	Kind   string     `json:"kind,omitempty"`
	Reason string     `json:"reason,omitempty"`
	Since  *time.Time `json:"since,omitempty"` // when the fault was first seen
	// Recovery is RecoveryAutomatic (writes resume by themselves, e.g.
	// once disk space is freed) or RecoveryRestart (restart the server
	// once the storage is repaired) when failing.
	Recovery string `json:"recovery,omitempty"`
}

// StoreStatus values.
const (
	StoreOK          = "ok"
	StoreUnavailable = "unavailable"
	StoreFailing     = "failing"

	RecoveryAutomatic = "automatic"
	RecoveryRestart   = "restart"
)

// Health checks the engine's dependencies. A store that reports faults
// (store.FaultReporter) and refuses writes is degraded, with the reason.
func (e *Engine) Health(ctx context.Context) Health {
	h := Health{Status: "ok", Store: "ok", StoreStatus: StoreStatus{Status: StoreOK}, Version: Version, InterfaceVersion: InterfaceVersion}
	var f *store.Fault
	if r, ok := e.store.Backend.(store.FaultReporter); ok {
		f = r.Fault()
	}
	switch {
	case f != nil: // the fault explains a failing ping too
		since := f.Since
		h.Status, h.Store = "degraded", f.Reason
		h.StoreStatus = StoreStatus{Status: StoreFailing, Kind: f.Kind, Reason: f.Reason, Since: &since, Recovery: RecoveryRestart}
		if f.Transient {
			h.StoreStatus.Recovery = RecoveryAutomatic
		}
	default:
		if err := e.store.Ping(ctx); err != nil {
			h.Status, h.Store = "degraded", err.Error()
			h.StoreStatus = StoreStatus{Status: StoreUnavailable, Reason: err.Error()}
		}
	}
	if e.keys.ActiveRevoked() {
		h.Status, h.GrantKey = "degraded", "revoked"
	}
	return h
}

func (e *Engine) now() time.Time { return e.deps.Now() }

// signingKeys returns the keys in use, read once per operation so that an
// operation signs and verifies with one ring even while it is replaced.
func (e *Engine) signingKeys() (*core.SigningKeys, error) { return e.keys.Current() }

// appendRecord ledgers a change whose stored form is v.
func (e *Engine) appendRecord(ctx context.Context, tx store.Tx, kind, subject string, v any) error {
	return core.AppendRecord(ctx, tx, kind, subject, v, e.now())
}

// newID returns a time-ordered UUID (v7).
func (e *Engine) newID() (string, error) { return e.deps.IDs.New() }

// ValidID reports whether s is a canonical lowercase UUID.
func ValidID(s string) bool { return core.ValidID(s) }

func isNotFound(err error) bool { return core.IsNotFound(err) }

func digestOf(b []byte) string { return canon.Digest(b) }
