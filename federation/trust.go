package federation

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/outbound"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// Ledger kinds of trust list changes (ledger.KindIssuerTrusted, …): the
// payload digest is that of the TrustedIssuer written, or of the removal.
const (
	trustKind = "federation.trust"
	trustID   = "issuers"
)

// TrustedIssuer is one entry of an org's trust list: a deployment whose
// federated decisions the org's policy may see. Its JSON form is the
// answer of the trust list routes and, canonical, the ledgered record.
type TrustedIssuer struct {
	// Issuer is the exact iss of the deployment's envelopes.
	Issuer string `json:"issuer"`
	// Orgs are the issuing org ids (the envelopes' org claim) trusted on
	// that deployment: a multi-tenant issuer signs for each of its orgs,
	// so trusting the deployment alone would trust every tenant's policy.
	// An entry stored before orgs were required has none and accepts no
	// envelope.
	Orgs []string `json:"orgs"`
	// JWKSURL is where its public keys are fetched; JWKS, instead, holds
	// them inline (exactly one of the two).
	JWKSURL string          `json:"jwks_url,omitempty"`
	JWKS    json.RawMessage `json:"jwks,omitempty"`
	// Audiences are accepted besides the org's own audience.
	Audiences []string `json:"audiences,omitempty"`
	// MaxAgeSeconds, when set, refuses decisions the issuer made longer
	// ago than this.
	MaxAgeSeconds int64  `json:"max_age_seconds,omitempty"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at"`
}

// IssuerRemoval is the ledgered record of an entry taken off a trust list.
type IssuerRemoval struct {
	Issuer    string `json:"issuer"`
	RemovedAt string `json:"removed_at"`
}

// TrustList is the answer of listing an org's trust list: the audience
// envelopes for the org must name, and the trusted issuers, oldest first.
type TrustList struct {
	Audience string          `json:"audience"`
	Issuers  []TrustedIssuer `json:"issuers"`
}

// trustSet is the org's one record of trusted issuers (bounded by
// MaxTrustedIssuers, so it is read whole).
type trustSet struct {
	Issuers []TrustedIssuer `json:"issuers"`
}

func (t trustSet) find(iss string) int {
	for i, e := range t.Issuers {
		if e.Issuer == iss {
			return i
		}
	}
	return -1
}

// issuerBody is the PUT body as received.
type issuerBody struct {
	Orgs          []string        `json:"orgs"`
	JWKSURL       *string         `json:"jwks_url"`
	JWKS          json.RawMessage `json:"jwks"`
	Audiences     []string        `json:"audiences"`
	MaxAgeSeconds *int64          `json:"max_age_seconds"`
}

// PutIssuer trusts issuer (the exact iss of its envelopes) for orgID, or
// replaces its entry, from the PUT body raw; created reports a new entry.
// The change is ledgered (federation.issuer_trusted) in the transaction
// that writes it, and a new entry beyond MaxTrustedIssuers is refused
// there (409 TRUSTED_ISSUER_LIMIT_REACHED). A jwks_url must pass the
// outbound client's guard; it is not fetched now.
func (s *Service) PutIssuer(ctx context.Context, orgID, issuer string, raw []byte) (TrustedIssuer, bool, error) {
	if err := checkIssuerID(issuer); err != nil {
		return TrustedIssuer{}, false, err
	}
	var b issuerBody
	if err := strictjson.Decode(raw, &b, s.d.JSON); err != nil {
		return TrustedIssuer{}, false, core.TranslateInput(err)
	}
	e, err := s.checkEntry(orgID, issuer, b)
	if err != nil {
		return TrustedIssuer{}, false, err
	}
	now := core.Format(s.d.Now())
	var created bool
	err = s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		set, err := readTrustTx(ctx, tx)
		if err != nil {
			return err
		}
		e.CreatedAt, e.UpdatedAt = now, now
		i := set.find(issuer)
		created = i < 0
		if created {
			if len(set.Issuers) >= MaxTrustedIssuers {
				return core.New(core.ErrConflict, CodeTrustedIssuerLimitReached,
					"an org trusts at most %d issuers: remove one first", MaxTrustedIssuers)
			}
			set.Issuers = append(set.Issuers, e)
		} else {
			e.CreatedAt = set.Issuers[i].CreatedAt
			set.Issuers[i] = e
		}
		if err := writeTrust(ctx, tx, set, s.d.Now()); err != nil {
			return err
		}
		return core.AppendRecord(ctx, tx, ledger.KindIssuerTrusted, issuer, e, s.d.Now())
	})
	if err != nil {
		return TrustedIssuer{}, false, core.Translate("trust issuer", err)
	}
	return e, created, nil
}

// DeleteIssuer takes issuer off orgID's trust list (ledgered:
// federation.issuer_removed) and returns the entry it removed. Envelopes of
// that issuer verify no more for the org from then on.
func (s *Service) DeleteIssuer(ctx context.Context, orgID, issuer string) (TrustedIssuer, error) {
	if err := checkIssuerID(issuer); err != nil {
		return TrustedIssuer{}, err
	}
	var removed TrustedIssuer
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		set, err := readTrustTx(ctx, tx)
		if err != nil {
			return err
		}
		i := set.find(issuer)
		if i < 0 {
			return errNoIssuer()
		}
		removed = set.Issuers[i]
		set.Issuers = append(set.Issuers[:i:i], set.Issuers[i+1:]...)
		if err := writeTrust(ctx, tx, set, s.d.Now()); err != nil {
			return err
		}
		return core.AppendRecord(ctx, tx, ledger.KindIssuerRemoved, issuer,
			IssuerRemoval{Issuer: issuer, RemovedAt: core.Format(s.d.Now())}, s.d.Now())
	})
	if err != nil {
		return TrustedIssuer{}, core.Translate("remove trusted issuer", err)
	}
	return removed, nil
}

// Issuer returns orgID's entry for issuer (404 TRUSTED_ISSUER_NOT_FOUND).
func (s *Service) Issuer(ctx context.Context, orgID, issuer string) (TrustedIssuer, error) {
	if err := checkIssuerID(issuer); err != nil {
		return TrustedIssuer{}, err
	}
	set, err := s.readTrust(ctx, orgID)
	if err != nil {
		return TrustedIssuer{}, err
	}
	i := set.find(issuer)
	if i < 0 {
		return TrustedIssuer{}, errNoIssuer()
	}
	return set.Issuers[i], nil
}

// Issuers lists orgID's trust list and the audience its envelopes name.
func (s *Service) Issuers(ctx context.Context, orgID string) (TrustList, error) {
	set, err := s.readTrust(ctx, orgID)
	if err != nil {
		return TrustList{}, err
	}
	if set.Issuers == nil {
		set.Issuers = []TrustedIssuer{}
	}
	return TrustList{Audience: s.Audience(orgID), Issuers: set.Issuers}, nil
}

func errNoIssuer() error {
	return core.New(core.ErrNotFound, CodeTrustedIssuerNotFound, "the org's trust list has no such issuer")
}

// checkIssuerID applies the issuer id grammar: a client token (1 to 255
// visible ASCII characters), so a URL is an issuer id too (percent-encode
// its slashes in the path).
func checkIssuerID(iss string) error {
	if !core.ValidToken(iss) {
		return core.Invalid(CodeInvalidIssuerID, "issuerId", "the issuer id must be 1 to %d visible ASCII characters", core.MaxKeyLength)
	}
	return nil
}

// checkEntry validates a PUT body into the entry it stores.
func (s *Service) checkEntry(orgID, issuer string, b issuerBody) (TrustedIssuer, error) {
	e := TrustedIssuer{Issuer: issuer}
	var p []core.FieldError
	bad := func(field, format string, args ...any) {
		p = append(p, core.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	hasJWKS := len(b.JWKS) > 0 && string(b.JWKS) != "null"
	switch {
	case b.JWKSURL == nil && !hasJWKS:
		bad("jwks_url", "jwks_url or jwks is required")
	case b.JWKSURL != nil && hasJWKS:
		bad("jwks", "give jwks_url or jwks, not both")
	case b.JWKSURL != nil:
		switch u := *b.JWKSURL; {
		case len(u) > MaxJWKSURLLen:
			bad("jwks_url", "is longer than %d bytes", MaxJWKSURLLen)
		default:
			if _, err := s.cfg.Client.CheckURL(u); err != nil {
				bad("jwks_url", "is not a destination Clearance may call: %s", destinationReason(err))
			}
			e.JWKSURL = u
		}
	default:
		if _, err := parseJWKS(b.JWKS); err != nil {
			if errors.Is(err, grant.ErrPrivateKeyMaterial) {
				return TrustedIssuer{}, core.Invalid(CodePrivateKeyMaterial, "jwks", "jwks holds private key material: give public keys only")
			}
			bad("jwks", "%v", err)
		}
		e.JWKS = b.JWKS
	}
	if len(b.Audiences) > MaxAudiences {
		bad("audiences", "at most %d audiences", MaxAudiences)
	}
	own := s.d.Issuer + audienceInfix
	for i, a := range b.Audiences {
		field := fmt.Sprintf("audiences[%d]", i)
		switch {
		case !core.ValidToken(a):
			bad(field, "must be 1 to %d visible ASCII characters", core.MaxKeyLength)
		case strings.HasPrefix(a, own) && a != own+orgID:
			bad(field, "names another org of this deployment")
		}
	}
	e.Audiences = b.Audiences
	switch {
	case b.Orgs == nil:
		bad("orgs", "is required: the ids of the issuing orgs trusted on this issuer")
	case len(b.Orgs) < 1 || len(b.Orgs) > MaxTrustedOrgs:
		bad("orgs", "must list 1 to %d org ids", MaxTrustedOrgs)
	}
	for i, o := range b.Orgs {
		field := fmt.Sprintf("orgs[%d]", i)
		switch {
		case !core.ValidID(o):
			bad(field, "must be an org id (a lowercase UUID)")
		case slices.Contains(b.Orgs[:i], o):
			bad(field, "repeats org %s", o)
		}
	}
	e.Orgs = b.Orgs
	if b.MaxAgeSeconds != nil {
		if v := *b.MaxAgeSeconds; v < 1 || v > int64(MaxDecisionAge/time.Second) {
			bad("max_age_seconds", "must be 1 to %d", int64(MaxDecisionAge/time.Second))
		}
		e.MaxAgeSeconds = *b.MaxAgeSeconds
	}
	if len(p) > 0 {
		return TrustedIssuer{}, &core.Error{Kind: core.ErrInvalidRequest, Code: CodeInvalidTrustedIssuer,
			Detail: "the trusted issuer is not valid: " + p[0].Field + " " + p[0].Message, Fields: p}
	}
	return e, nil
}

// parseJWKS reads a JWKS's Ed25519 verification keys by kid. A set with
// private key material is refused whole (wrapping
// grant.ErrPrivateKeyMaterial), as is one without a usable key or with a
// kid twice; keys of other types are skipped (RFC 7517 §5).
func parseJWKS(raw []byte) (map[string]ed25519.PublicKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := strictjson.Decode(raw, &set, strictjson.Options{}); err != nil {
		return nil, fmt.Errorf("is not a JWKS: %v", err)
	}
	if len(set.Keys) > MaxInlineKeys {
		return nil, fmt.Errorf("holds more than %d keys", MaxInlineKeys)
	}
	keys := make(map[string]ed25519.PublicKey, len(set.Keys))
	for i, k := range set.Keys {
		pub, kid, err := grant.ParsePublicJWK(k)
		switch {
		case errors.Is(err, grant.ErrPrivateKeyMaterial):
			return nil, fmt.Errorf("key %d: %w", i, err)
		case err != nil || kid == "":
			continue
		}
		if _, dup := keys[kid]; dup {
			return nil, fmt.Errorf("kid %q appears twice", kid)
		}
		keys[kid] = pub
	}
	if len(keys) == 0 {
		return nil, errors.New("holds no Ed25519 key with a kid")
	}
	return keys, nil
}

func readTrustTx(ctx context.Context, tx store.Tx) (trustSet, error) {
	return decodeTrust(tx.ArtifactInTx(ctx, trustKind, trustID))
}

func (s *Service) readTrust(ctx context.Context, orgID string) (trustSet, error) {
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return trustSet{}, err
	}
	return decodeTrust(s.d.Store.Artifact(ctx, orgID, trustKind, trustID))
}

func decodeTrust(rec artifact.Record, err error) (trustSet, error) {
	if core.IsNotFound(err) {
		return trustSet{}, nil
	}
	if err != nil {
		return trustSet{}, core.Translate("read trust list", err)
	}
	var set trustSet
	if err := json.Unmarshal(rec.Body, &set); err != nil {
		return trustSet{}, core.Unavailable("decode trust list", err)
	}
	for i := range set.Issuers {
		if set.Issuers[i].Orgs == nil { // stored before orgs were required: trusts no org
			set.Issuers[i].Orgs = []string{}
		}
	}
	return set, nil
}

func writeTrust(ctx context.Context, tx store.Tx, set trustSet, now time.Time) error {
	if set.Issuers == nil {
		set.Issuers = []TrustedIssuer{}
	}
	b, err := json.Marshal(set)
	if err != nil {
		return err
	}
	return tx.PutArtifact(ctx, artifact.Record{OrgID: tx.OrgID(), Kind: trustKind, ID: trustID, CreatedAt: now, Body: b})
}

// destinationReason says why the outbound guard refused a URL.
func destinationReason(err error) string {
	if errors.Is(err, outbound.ErrBlockedDestination) {
		return "it names a loopback, private, link-local, metadata, multicast or unspecified address (or a local name)"
	}
	return "it must be an absolute https URL without userinfo (http only with --allow-private-destinations)"
}
