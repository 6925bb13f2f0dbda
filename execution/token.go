package execution

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/decide"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
)

// tokenGrant is a grant token checked against the key ring, with the stored
// grant its jti names (or the error reading it).
type tokenGrant struct {
	claims    grant.Claims
	stored    claim.Grant
	lookupErr error
	// recognized: the token is byte for byte the one recorded at issue.
	recognized bool
}

// checkToken verifies a grant token and reads the grant it names. A token
// byte-identical to the one recorded at issue is recognized by its digest,
// which spares the Ed25519 check (grant.VerifyOptions.Recognize); any other
// token is verified in full. A verification failure is returned as the
// grant package's error; a failed read of the stored grant is in lookupErr.
// The token's claims are compared with the stored grant by grantOf.
// ignoreLifetime skips the checks against the engine's clock (iat, nbf,
// exp): finalize and dispatch act under a claim lease, which the store's
// clock judges, so an engine clock that jumped must not refuse them.
func (s *Service) checkToken(ctx context.Context, orgID, token string, ignoreLifetime bool) (tokenGrant, error) {
	keys, err := s.d.Keys.Current()
	if err != nil {
		return tokenGrant{}, err
	}
	var (
		tg     tokenGrant
		looked string
	)
	recognize := func(jti string, digest [sha256.Size]byte) bool {
		looked = jti
		tg.stored, tg.lookupErr = s.d.Store.GrantOf(ctx, orgID, jti)
		want := canon.FormatDigest(digest)
		tg.recognized = tg.lookupErr == nil && subtle.ConstantTimeCompare([]byte(tg.stored.TokenDigest), []byte(want)) == 1
		return tg.recognized
	}
	tg.claims, err = grant.Verify(token, keys, grant.VerifyOptions{Now: s.d.Now(), Issuer: s.d.Issuer,
		MaxFutureIssuedAt: s.d.MaxClockSkew, IgnoreLifetime: ignoreLifetime, Recognize: recognize})
	if err != nil {
		return tokenGrant{}, err
	}
	if looked != tg.claims.ID {
		tg.recognized = false
		tg.stored, tg.lookupErr = s.d.Store.GrantOf(ctx, orgID, tg.claims.ID)
	}
	return tg, nil
}

// grantOf returns the stored grant of a verified token, which must be the
// token issued for it: one recognized by its digest is; any other must state
// exactly the claims rebuilt from the stored grant, every member
// (BINDING_MISMATCH otherwise), so that nothing a caller presents stands in
// for what was issued.
func (s *Service) grantOf(ctx context.Context, tg tokenGrant) (claim.Grant, error) {
	if core.IsNotFound(tg.lookupErr) {
		return claim.Grant{}, core.New(core.ErrConflict, CodeGrantInvalid, "the execution grant is not known")
	}
	if tg.lookupErr != nil {
		return claim.Grant{}, core.Unavailable("read grant", tg.lookupErr)
	}
	if tg.recognized {
		return tg.stored, nil
	}
	opened, err := s.opened(ctx, tg.stored)
	if err != nil {
		return claim.Grant{}, err
	}
	intent, err := s.boundIntent(opened)
	if err != nil {
		return claim.Grant{}, err
	}
	// Grants are issued only for ENFORCEMENT.
	if !tg.claims.Equal(decide.GrantClaims(s.d.Issuer, opened, intent.ExecutionIntent, policy.ModeEnforcement)) {
		return claim.Grant{}, core.New(core.ErrConflict, CodeBindingMismatch, "the execution grant does not match its recorded binding")
	}
	return tg.stored, nil
}

// opened returns g with the actor and bound intent its data-protection
// sealing keeps (decide.OpenGrant); g itself when it was not sealed. A grant
// whose data subject was erased is a stale authorization: its intent is
// gone, so it can never be evaluated again, claimed or verified.
func (s *Service) opened(ctx context.Context, g claim.Grant) (claim.Grant, error) {
	if g.PersonalData == nil {
		return g, nil
	}
	out, erased, err := decide.OpenGrant(ctx, s.cfg.Personal, g)
	if err != nil {
		return claim.Grant{}, err
	}
	if erased {
		return claim.Grant{}, core.New(core.ErrConflict, core.CodeStaleAuthorization,
			"the grant's data subject was erased: its bound intent is gone, and the grant can never be claimed")
	}
	return out, nil
}

// boundIntent decodes the canonical intent a grant was issued for, within
// the JSON limits it was accepted under.
func (s *Service) boundIntent(g claim.Grant) (decide.BoundIntent, error) {
	var intent decide.BoundIntent
	opts := s.d.JSON
	opts.RejectUnknown = false
	if err := strictjson.Decode(g.Intent, &intent, opts); err != nil {
		return intent, &core.Error{Kind: core.ErrConflict, Code: CodeBindingMismatch, Detail: "the grant's recorded intent cannot be read", Err: err}
	}
	return intent, nil
}

// verifyToken checks a grant token's signature, type, issuer and lifetime,
// its tenant and its binding to intentHash, and returns its stored grant,
// which the token states exactly (grantOf).
func (s *Service) verifyToken(ctx context.Context, orgID, token, intentHash string) (claim.Grant, error) {
	if token == "" {
		return claim.Grant{}, core.Invalid(core.CodeInvalidRequest, "execution_token", "execution_token is required")
	}
	tg, err := s.checkToken(ctx, orgID, token, false)
	var te *grant.TokenError
	switch {
	case errors.Is(err, grant.ErrTokenExpired):
		return claim.Grant{}, &core.Error{Kind: core.ErrConflict, Code: CodeGrantExpired, Detail: "the execution grant has expired", Err: err}
	case errors.As(err, &te):
		return claim.Grant{}, &core.Error{Kind: core.ErrConflict, Code: CodeGrantInvalid, Detail: "the execution grant is not valid: " + err.Error(), Err: err}
	case err != nil:
		return claim.Grant{}, err
	}
	c := tg.claims
	if c.OrgID != orgID {
		return claim.Grant{}, core.New(core.ErrConflict, CodeGrantInvalid, "the execution grant belongs to another organization")
	}
	if intentHash == "" || c.IntentHash != intentHash {
		return claim.Grant{}, core.New(core.ErrConflict, CodeGrantNotBound, "the execution grant is not bound to this intent_hash")
	}
	return s.grantOf(ctx, tg)
}

// GrantStatus is the verify-token answer.
type GrantStatus struct {
	Valid      bool         `json:"valid"`
	GrantID    string       `json:"grant_id"`
	DecisionID string       `json:"decision_id"`
	DossierID  string       `json:"dossier_id"`
	IntentHash string       `json:"intent_hash"`
	ExpiresAt  string       `json:"expires_at"`
	State      claim.State  `json:"state"`
	Action     grant.Action `json:"act"`
	ActorID    string       `json:"sub"`
}

// VerifyGrant checks a grant without consuming it: the token is verified
// as a claim verifies it, and the grant must still be ISSUED (a claimed or
// finalized grant is GRANT_ALREADY_CLAIMED). What it reports comes from the
// stored grant. It never authorizes execution by itself.
func (s *Service) VerifyGrant(ctx context.Context, orgID, token, intentHash string) (GrantStatus, error) {
	g, err := s.verifyToken(ctx, orgID, token, intentHash)
	if err != nil {
		return GrantStatus{}, err
	}
	if g.State != claim.StateIssued {
		return GrantStatus{}, core.New(core.ErrConflict, CodeGrantAlreadyClaimed, "the execution grant was already claimed (it is %s)", g.State)
	}
	if g, err = s.opened(ctx, g); err != nil {
		return GrantStatus{}, err
	}
	intent, err := s.boundIntent(g)
	if err != nil {
		return GrantStatus{}, err
	}
	return GrantStatus{Valid: true, GrantID: g.GrantID, DecisionID: g.DecisionID, DossierID: g.DossierID,
		IntentHash: g.IntentHash, ExpiresAt: g.ExpiresAt.Format(core.TimeFormat), State: g.State, Action: decide.ActionClaim(intent.Action),
		ActorID: g.ActorID}, nil
}
