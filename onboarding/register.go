package onboarding

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// Record kinds of the accounts pseudo-org and of an org.
const (
	kindChallenge = "onboarding.challenge" // AccountsOrgID, id: addressKey
	kindAccount   = "onboarding.account"   // AccountsOrgID, id: addressKey
	kindGrants    = "onboarding.grants"    // the org, id: idGrants
	idGrants      = "grants"
)

// StartRequest is the body of register/start.
type StartRequest struct {
	OwnerEmail string `json:"owner_email"`
	OwnerName  string `json:"owner_name"`
	OrgName    string `json:"org_name"`
}

// Started is the answer to Start: the same for every address.
type Started struct {
	Status           string `json:"status"` // "code_sent"
	ExpiresInSeconds int    `json:"expires_in_seconds"`
}

// challenge is an address's pending sign-up, with its code's MAC.
type challenge struct {
	Email     string    `json:"email"`
	OwnerName string    `json:"owner_name"`
	OrgName   string    `json:"org_name"`
	CodeMAC   string    `json:"code_mac,omitempty"` // "": used or burned
	ExpiresAt time.Time `json:"expires_at"`
	Attempts  int       `json:"attempts"`
	// Sends are the times codes were sent within the send window.
	Sends []time.Time `json:"sends"`
}

// account is an owner: an address that proved itself, and its orgs.
type account struct {
	AccountID string    `json:"account_id"`
	Email     string    `json:"email"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	// OrgIDs are the orgs it registered, oldest first. The last may not
	// exist: it is listed before the transaction that creates it.
	OrgIDs []string `json:"org_ids"`
}

// grants is an org's onboarding grants, kept so that the bundle's
// transaction revokes them without a read by hash.
type grants struct {
	Keys []tenant.APIKey `json:"keys"`
}

// codeContext names the record a code's MAC belongs to.
func codeContext(kind, key string) string {
	if kind == kindChallenge {
		return "onboarding/code/" + key // the form of the first release
	}
	return "onboarding/code/" + kind + "/" + key
}

// Start stores a fresh code for the body's address and mails it.
func (s *Service) Start(ctx context.Context, raw []byte) (Started, error) {
	var req StartRequest
	if err := strictjson.Decode(raw, &req, s.d.JSON); err != nil {
		return Started{}, err
	}
	email, err := normalEmail(req.OwnerEmail)
	if err != nil {
		return Started{}, err
	}
	ownerName, err := CheckName("owner_name", req.OwnerName)
	if err != nil {
		return Started{}, err
	}
	orgName, err := CheckName("org_name", req.OrgName)
	if err != nil {
		return Started{}, err
	}
	return s.sendCode(ctx, kindChallenge, email, challenge{Email: email, OwnerName: ownerName, OrgName: orgName},
		"Your Clearance sign-up code", func(code string, minutes int) string {
			return fmt.Sprintf("Your Clearance sign-up code is %s.\r\n\r\nIt creates the workspace %q for %s. "+
				"It expires in %d minutes and works once. If you did not ask for it, ignore this message.\r\n",
				code, orgName, ownerName, minutes)
		})
}

func macOf(s *Service, kind, code, key string) string {
	return base64.RawURLEncoding.EncodeToString(s.d.Secrets.MAC([]byte(code), codeContext(kind, key)))
}

// VerifyRequest is the body of register/verify.
type VerifyRequest struct {
	OwnerEmail string `json:"owner_email"`
	OTPCode    string `json:"otp_code"`
}

// Verified is the answer to Verify: an onboarding grant, never an API key.
type Verified struct {
	OnboardingGrant string    `json:"onboarding_grant"`
	GrantID         string    `json:"grant_id"`
	GrantExpiresAt  string    `json:"grant_expires_at"`
	OrgID           string    `json:"org_id"`
	AccountID       string    `json:"account_id"`
	Workspace       Workspace `json:"workspace"`
}

// Workspace is an org as its owner finds it: its name and the paths of
// the next steps.
type Workspace struct {
	OrgID string         `json:"org_id"`
	Name  string         `json:"name"`
	Paths WorkspacePaths `json:"paths"`
}

// WorkspacePaths are the routes an owner uses next, resolved for the org.
type WorkspacePaths struct {
	MappingSessions    string `json:"mapping_sessions"`
	EvaluateDecision   string `json:"evaluate_decision"`
	SignalConnectors   string `json:"signal_connectors"`
	WebhookIntegration string `json:"webhook_integration"`
}

func workspaceOf(orgID, name string) Workspace {
	return Workspace{OrgID: orgID, Name: name, Paths: WorkspacePaths{
		MappingSessions:    "/v1/public/pilot/signal-mapping/sessions",
		EvaluateDecision:   "/v1/protocol/evaluate-decision",
		SignalConnectors:   "/v1/signals/connectors",
		WebhookIntegration: "/v1/orgs/" + orgID + "/integrations/WEBHOOK/connect",
	}}
}

// errOTP is the one answer to every code that does not verify.
func errOTP() error {
	return core.New(core.ErrUnauthenticated, CodeOTPInvalid, "the code is wrong, expired or used; ask for a new one")
}

// Verify checks the body's code; on success it creates the org the
// sign-up named and an onboarding grant for it.
func (s *Service) Verify(ctx context.Context, raw []byte) (Verified, error) {
	var req VerifyRequest
	if err := strictjson.Decode(raw, &req, s.d.JSON); err != nil {
		return Verified{}, err
	}
	email, err := normalEmail(req.OwnerEmail)
	if err != nil {
		return Verified{}, err
	}
	if !validCode(req.OTPCode) {
		return Verified{}, core.Invalid(core.CodeInvalidRequest, "otp_code", "otp_code must be exactly 6 ASCII digits")
	}
	if s.d.Secrets == nil {
		return Verified{}, core.New(core.ErrUnavailable, core.CodeSecretsNotConfigured, "sign-up codes need a secrets key, and none is configured")
	}
	orgID, err := s.d.IDs.New()
	if err != nil {
		return Verified{}, core.Unavailable("id generation", err)
	}
	key, now := addressKey(email), s.d.Now()
	var c challenge
	var acc account
	ok, err := s.spendCode(ctx, kindChallenge, key, req.OTPCode, now, func(tx store.Tx) error {
		// The sign-up the code belongs to, and the org listed on the
		// account, in the transaction that spends it.
		c, acc = challenge{}, account{}
		if err := core.ReadRecord(ctx, tx, kindChallenge, key, &c); err != nil {
			return err
		}
		switch err := core.ReadRecord(ctx, tx, kindAccount, key, &acc); {
		case core.IsNotFound(err):
			id, err := s.d.IDs.New()
			if err != nil {
				return err
			}
			acc = account{AccountID: id, Email: email, Name: c.OwnerName, CreatedAt: now}
		case err != nil:
			return err
		}
		if acc.Name == "" {
			acc.Name = c.OwnerName
		}
		acc.OrgIDs = append(acc.OrgIDs, orgID)
		return core.WriteRecord(ctx, tx, kindAccount, key, now, acc)
	})
	if err != nil {
		return Verified{}, core.Translate("verify sign-up", err)
	}
	if !ok {
		return Verified{}, errOTP()
	}
	var grant admin.IssuedKey
	expires := now.Add(s.cfg.GrantTTL)
	_, err = s.cfg.Admin.CreateOrgWith(ctx, orgID, c.OrgName, func(ctx context.Context, tx store.Tx, org tenant.Org) error {
		var err error
		grant, err = s.cfg.Admin.IssueKeyIn(ctx, tx, admin.KeySpec{OrgID: org.ID, Kind: tenant.KindOnboarding,
			Scopes: []tenant.Scope{}, ExpiresAt: expires})
		if err != nil {
			return err
		}
		return core.WriteRecord(ctx, tx, kindGrants, idGrants, now, grants{Keys: []tenant.APIKey{grant.Stored}})
	})
	if err != nil {
		return Verified{}, err
	}
	return Verified{OnboardingGrant: grant.Secret, GrantID: grant.KeyID, GrantExpiresAt: core.Format(expires),
		OrgID: orgID, AccountID: acc.AccountID, Workspace: workspaceOf(orgID, c.OrgName)}, nil
}
