package onboarding

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// The zero-human lane: an agent starts a provisional workspace without a
// human, and an owner who proved an address by code claims it later.
const (
	// ProvisionalTTL is a provisional workspace's quota: its key works, and
	// its claim code claims it, this long.
	ProvisionalTTL = 72 * time.Hour
	// ProvisionWindow is the window of the provisioning budgets.
	ProvisionWindow = time.Hour
	// MaxProvisionsPerSource bounds the workspaces one source (an IPv4
	// address, an IPv6 /64) starts per ProvisionWindow.
	MaxProvisionsPerSource = 3
	// MaxProvisions bounds the workspaces every source together starts per
	// ProvisionWindow, on every server sharing the store.
	MaxProvisions = 100
	// PrefixClaimCode starts a claim code.
	PrefixClaimCode = "clr_clm_"
	// DefaultProvisionalName names a workspace whose agent gave no name.
	DefaultProvisionalName = "Provisional workspace"

	kindProvisional  = "onboarding.provisional" // the org, id: idProvisional
	idProvisional    = "workspace"
	kindClaim        = "onboarding.claim"  // AccountsOrgID, id: claimKey
	kindProvisioning = "onboarding.budget" // AccountsOrgID, id: "global" or sourceKey
	idGlobalBudget   = "global"
)

// Codes of the zero-human lane's refusals.
const (
	CodeTooManyWorkspaces = "TOO_MANY_WORKSPACES"
	CodeClaimCodeInvalid  = "CLAIM_CODE_INVALID"
	CodeAlreadyClaimed    = "WORKSPACE_ALREADY_CLAIMED"
)

// ProvisionalScopes are the scopes of a provisional workspace's key: it
// decides and reads its decisions, and nothing else (no policy, so the
// org stays on the starter policy in SHADOW; no keys, integrations or
// audit routes).
var ProvisionalScopes = []tenant.Scope{tenant.ScopeDecisionWrite, tenant.ScopeDecisionRead}

// ProvisionRequest is the body of the provisioning route; every member is
// optional.
type ProvisionRequest struct {
	Name string `json:"name"`
}

// Provisional is a provisional workspace, answered once: its key and its
// claim code are never shown again.
type Provisional struct {
	OrgID          string         `json:"org_id"`
	APIKey         string         `json:"api_key"`
	KeyID          string         `json:"key_id"`
	Scopes         []tenant.Scope `json:"scopes"`
	KeyExpiresAt   string         `json:"key_expires_at"`
	ClaimCode      string         `json:"claim_code"`
	ClaimExpiresAt string         `json:"claim_expires_at"`
	Mode           string         `json:"mode"` // SHADOW
	PolicyVersion  string         `json:"policy_version"`
	Workspace      Workspace      `json:"workspace"`
}

// provisional is the org's record of its provisional start and its claim.
type provisional struct {
	KeyID          string    `json:"key_id"`
	ClaimExpiresAt time.Time `json:"claim_expires_at"`
	ClaimedBy      string    `json:"claimed_by,omitempty"` // account id
	ClaimedAt      time.Time `json:"claimed_at,omitzero"`
}

// claim is a claim code's record, filed by its MAC.
type claim struct {
	OrgID     string    `json:"org_id"`
	ExpiresAt time.Time `json:"expires_at"`
	// ClaimedBy is the account that spent it ("" while unspent).
	ClaimedBy string `json:"claimed_by,omitempty"`
}

// budget is the starts of one provisioning budget within the window.
type budget struct {
	Starts []time.Time `json:"starts"`
}

// provisionedEvent and claimedEvent are the ledgered forms.
type provisionedEvent struct {
	KeyID          string         `json:"key_id"`
	Scopes         []tenant.Scope `json:"scopes"`
	KeyExpiresAt   string         `json:"key_expires_at"`
	ClaimExpiresAt string         `json:"claim_expires_at"`
	At             string         `json:"at"`
}

type claimedEvent struct {
	AccountID string `json:"account_id"`
	KeyID     string `json:"key_id"`
	At        string `json:"at"`
}

// sourceKey groups a source address: an IPv4 address alone, an IPv6
// address with its /64 (what one host is normally given).
func sourceKey(source string) string {
	group := source
	if a, err := netip.ParseAddr(source); err == nil {
		a = a.Unmap()
		if a.Is6() {
			p, _ := a.Prefix(64)
			group = p.String()
		} else {
			group = a.String()
		}
	}
	sum := sha256.Sum256([]byte("onboarding/source\x00" + group))
	return hex.EncodeToString(sum[:])
}

// spendBudget records a start against the budget id, or refuses it with
// the delay until the window has room.
func spendBudget(ctx context.Context, tx store.Tx, id string, limit int, now time.Time) error {
	var b budget
	if err := core.ReadRecord(ctx, tx, kindProvisioning, id, &b); err != nil && !core.IsNotFound(err) {
		return err
	}
	recent := []time.Time{}
	for _, at := range b.Starts {
		if now.Sub(at) < ProvisionWindow {
			recent = append(recent, at)
		}
	}
	if len(recent) >= limit {
		return &core.Error{Kind: core.ErrTooManyRequests, Code: CodeTooManyWorkspaces,
			Detail:     "too many provisional workspaces were started; retry after the Retry-After delay",
			RetryAfter: recent[0].Add(ProvisionWindow).Sub(now)}
	}
	return core.WriteRecord(ctx, tx, kindProvisioning, id, now, budget{Starts: append(recent, now)})
}

func claimKey(s *Service, code string) string {
	return hex.EncodeToString(s.d.Secrets.MAC([]byte(code), "onboarding/claim"))
}

// Provision starts a provisional workspace for an agent, from source (the
// caller's address): an org on the starter policy in SHADOW, a key with
// ProvisionalScopes good for ProvisionalTTL, and a claim code good as
// long. Starts are budgeted per source and in all (MaxProvisionsPerSource,
// MaxProvisions per ProvisionWindow) in the store, before anything is made.
func (s *Service) Provision(ctx context.Context, source string, raw []byte) (Provisional, error) {
	var req ProvisionRequest
	if len(raw) > 0 {
		if err := strictjson.Decode(raw, &req, s.d.JSON); err != nil {
			return Provisional{}, err
		}
	}
	name := DefaultProvisionalName
	if req.Name != "" {
		var err error
		if name, err = CheckName("name", req.Name); err != nil {
			return Provisional{}, err
		}
	}
	if s.d.Secrets == nil {
		return Provisional{}, core.New(core.ErrUnavailable, core.CodeSecretsNotConfigured, "claim codes need a secrets key, and none is configured")
	}
	orgID, err := s.d.IDs.New()
	if err != nil {
		return Provisional{}, core.Unavailable("id generation", err)
	}
	code, _, err := tenant.NewSecret(s.d.IDs.Rand, PrefixClaimCode)
	if err != nil {
		return Provisional{}, core.Unavailable("claim code generation", err)
	}
	now := s.d.Now()
	expires := now.Add(ProvisionalTTL)
	err = s.d.Store.Backend.Update(ctx, AccountsOrgID, func(tx store.Tx) error {
		if err := spendBudget(ctx, tx, sourceKey(source), MaxProvisionsPerSource, now); err != nil {
			return err
		}
		if err := spendBudget(ctx, tx, idGlobalBudget, MaxProvisions, now); err != nil {
			return err
		}
		// Filed before the org exists: a claim of an org whose creation
		// failed finds no workspace.
		return core.WriteRecord(ctx, tx, kindClaim, claimKey(s, code), now, claim{OrgID: orgID, ExpiresAt: expires})
	})
	if err != nil {
		return Provisional{}, core.Translate("provision workspace", err)
	}
	var key admin.IssuedKey
	_, err = s.cfg.Admin.CreateOrgWith(ctx, orgID, name, func(ctx context.Context, tx store.Tx, org tenant.Org) error {
		var err error
		key, err = s.cfg.Admin.IssueKeyIn(ctx, tx, admin.KeySpec{OrgID: org.ID, Kind: tenant.KindOrg,
			Scopes: ProvisionalScopes, ExpiresAt: expires})
		if err != nil {
			return err
		}
		if err := core.WriteRecord(ctx, tx, kindProvisional, idProvisional, now, provisional{KeyID: key.KeyID, ClaimExpiresAt: expires}); err != nil {
			return err
		}
		return core.AppendRecord(ctx, tx, ledger.KindWorkspaceProvisioned, org.ID, provisionedEvent{KeyID: key.KeyID,
			Scopes: ProvisionalScopes, KeyExpiresAt: core.Format(expires), ClaimExpiresAt: core.Format(expires), At: core.Format(now)}, now)
	})
	if err != nil {
		return Provisional{}, err
	}
	version, err := s.cfg.PolicyVersion(ctx, orgID)
	if err != nil {
		return Provisional{}, err
	}
	return Provisional{OrgID: orgID, APIKey: key.Secret, KeyID: key.KeyID, Scopes: key.Scopes, KeyExpiresAt: core.Format(expires),
		ClaimCode: code, ClaimExpiresAt: core.Format(expires), Mode: "SHADOW", PolicyVersion: version,
		Workspace: workspaceOf(orgID, name)}, nil
}

// ClaimRequest is the body of the claim route.
type ClaimRequest struct {
	ClaimCode string `json:"claim_code"`
}

// Claimed is a claimed workspace: the owner's key, shown once.
type Claimed struct {
	OrgID     string         `json:"org_id"`
	APIKey    string         `json:"api_key"`
	KeyID     string         `json:"key_id"`
	Scopes    []tenant.Scope `json:"scopes"`
	Workspace Workspace      `json:"workspace"`
}

// validClaimCode reports whether s may be a claim code: its prefix, at
// most 128 bytes. Anything else of that shape is looked up, and an
// unknown code is CLAIM_CODE_INVALID.
func validClaimCode(s string) bool {
	return strings.HasPrefix(s, PrefixClaimCode) && len(s) <= 128
}

func errClaimCode() error {
	return core.New(core.ErrNotFound, CodeClaimCodeInvalid, "the claim code is unknown, expired or spent")
}

// Claim makes a provisional workspace the session's account's: the code is
// spent for the account and the org listed on it (one transaction of the
// accounts), then the org becomes a normal org and its owner gets an org:*
// key (one transaction of the org, ledgered). A code spent by another
// account, unknown or expired is CLAIM_CODE_INVALID; a workspace claimed
// already is WORKSPACE_ALREADY_CLAIMED and mints nothing.
func (s *Service) Claim(ctx context.Context, as AccountSession, raw []byte) (Claimed, error) {
	var req ClaimRequest
	if err := strictjson.Decode(raw, &req, s.d.JSON); err != nil {
		return Claimed{}, err
	}
	if !validClaimCode(req.ClaimCode) {
		return Claimed{}, core.Invalid(core.CodeInvalidRequest, "claim_code", "claim_code must be the clr_clm_… code the workspace was started with")
	}
	if s.d.Secrets == nil {
		return Claimed{}, core.New(core.ErrUnavailable, core.CodeSecretsNotConfigured, "claim codes need a secrets key, and none is configured")
	}
	id, now := claimKey(s, req.ClaimCode), s.d.Now()
	var c claim
	err := s.d.Store.Backend.Update(ctx, AccountsOrgID, func(tx store.Tx) error {
		c = claim{}
		switch err := core.ReadRecord(ctx, tx, kindClaim, id, &c); {
		case core.IsNotFound(err):
			return errClaimCode()
		case err != nil:
			return err
		}
		if !now.Before(c.ExpiresAt) || c.ClaimedBy != "" && c.ClaimedBy != as.AccountID {
			return errClaimCode()
		}
		var acc account
		if err := core.ReadRecord(ctx, tx, kindAccount, as.key, &acc); err != nil {
			return err
		}
		// A retry by the account that spent it writes nothing: a refusal
		// that follows changes nothing.
		if !slices.Contains(acc.OrgIDs, c.OrgID) {
			acc.OrgIDs = append(acc.OrgIDs, c.OrgID)
			if err := core.WriteRecord(ctx, tx, kindAccount, as.key, now, acc); err != nil {
				return err
			}
		}
		if c.ClaimedBy == as.AccountID {
			return nil
		}
		c.ClaimedBy = as.AccountID
		return core.WriteRecord(ctx, tx, kindClaim, id, now, c)
	})
	if err != nil {
		return Claimed{}, core.Translate("claim workspace", err)
	}
	var key admin.IssuedKey
	var name string
	err = s.d.Store.Update(ctx, c.OrgID, func(tx store.Tx) error {
		var p provisional
		switch err := core.ReadRecord(ctx, tx, kindProvisional, idProvisional, &p); {
		case core.IsNotFound(err):
			return errClaimCode() // the org's creation failed
		case err != nil:
			return err
		}
		if p.ClaimedBy != "" {
			return core.New(core.ErrConflict, CodeAlreadyClaimed, "the workspace was claimed already; its owner's key was shown then")
		}
		var err error
		if key, err = s.cfg.Admin.IssueKeyIn(ctx, tx, admin.KeySpec{OrgID: c.OrgID, Kind: tenant.KindOrg,
			Scopes: []tenant.Scope{tenant.ScopeOrgAll}}); err != nil {
			return err
		}
		p.ClaimedBy, p.ClaimedAt = as.AccountID, now
		if err := core.WriteRecord(ctx, tx, kindProvisional, idProvisional, now, p); err != nil {
			return err
		}
		return core.AppendRecord(ctx, tx, ledger.KindWorkspaceClaimed, c.OrgID, claimedEvent{AccountID: as.AccountID,
			KeyID: key.KeyID, At: core.Format(now)}, now)
	})
	if err != nil {
		return Claimed{}, core.Translate("claim workspace", err)
	}
	if o, err := s.cfg.Admin.Org(ctx, c.OrgID); err == nil {
		name = o.Name
	}
	return Claimed{OrgID: c.OrgID, APIKey: key.Secret, KeyID: key.KeyID, Scopes: key.Scopes, Workspace: workspaceOf(c.OrgID, name)}, nil
}
