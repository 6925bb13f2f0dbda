package grant

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"time"

	"github.com/clearancehq/clearance/internal/canon"
)

// Token types (the JWS header "typ") and audiences. Each kind of token has
// its own typ and aud and its own verify function; one kind is never
// accepted as another.
const (
	TypGrant       = "clearance-grant+jwt"
	TypAttestation = "clearance-claim-attestation+jwt"
	TypDecision    = "clearance-decision+jwt"
	TypIntent      = "clearance-intent+jwt"
	TypReceipt     = "clearance-effect-receipt+jwt"

	// AudGrant: grants are presented back to Clearance (verify, claim,
	// finalize).
	AudGrant = "clearance-execution"
	// AudAttestation: claim attestations are checked by the downstream
	// system.
	AudAttestation = "clearance-downstream"
	// AudDecision: verification envelopes are checked by the agent pipeline.
	AudDecision = "agent-safe-pipeline"

	// PayloadProfile names how payload digests are computed: RFC 8785
	// canonical JSON, then SHA-256.
	PayloadProfile = "JCS-SHA256"
)

// Action is the action a grant authorizes.
type Action struct {
	Type     string   `json:"type"`
	Amount   *float64 `json:"amount,omitempty"`
	Currency string   `json:"currency,omitempty"`
	Target   string   `json:"target,omitempty"`
}

// Equal reports whether a and o are the same action, the amount compared
// by value.
func (a Action) Equal(o Action) bool {
	if (a.Amount == nil) != (o.Amount == nil) || (a.Amount != nil && *a.Amount != *o.Amount) {
		return false
	}
	return a.Type == o.Type && a.Currency == o.Currency && a.Target == o.Target
}

// Claims are the claims of an execution grant.
type Claims struct {
	Issuer               string `json:"iss"`
	Audience             string `json:"aud"` // AudGrant
	Subject              string `json:"sub"` // the actor id
	OrgID                string `json:"org"`
	ID                   string `json:"jti"` // the grant id
	IssuedAt             int64  `json:"iat"` // Unix seconds, as nbf and exp
	NotBefore            int64  `json:"nbf"`
	Expiry               int64  `json:"exp"`
	Action               Action `json:"act"`
	IntentHash           string `json:"intent_hash"`
	PayloadDigest        string `json:"payload_digest"`
	PayloadProfile       string `json:"payload_profile"`
	ExpectedEffectDigest string `json:"expected_effect_digest,omitempty"`
	Nonce                string `json:"nonce"`
	Scope                string `json:"scope"`
	Correlation          string `json:"corr,omitempty"`
	DecisionID           string `json:"decision_id"`
	DossierID            string `json:"dossier_id"`
	Mode                 string `json:"mode"`
}

// Equal reports whether c and o state the same grant: every member equal,
// act by value (Action.Equal).
func (c Claims) Equal(o Claims) bool {
	ca, oa := c, o
	ca.Action, oa.Action = Action{}, Action{}
	return ca == oa && c.Action.Equal(o.Action)
}

// Binding is what a claim attestation repeats of the grant it claimed.
type Binding struct {
	IntentHash           string `json:"intent_hash"`
	PayloadDigest        string `json:"payload_digest"`
	PayloadProfile       string `json:"payload_profile"`
	ExpectedEffectDigest string `json:"expected_effect_digest,omitempty"`
	Nonce                string `json:"nonce"`
	Scope                string `json:"scope"`
	Correlation          string `json:"corr,omitempty"`
}

// Attestation is a claim attestation: proof, for the downstream system, that
// a grant was claimed, valid until the claim lease ends.
type Attestation struct {
	Issuer           string  `json:"iss"`
	Audience         string  `json:"aud"` // AudAttestation
	Subject          string  `json:"sub"` // the actor id
	OrgID            string  `json:"org"`
	ID               string  `json:"jti"`
	IssuedAt         int64   `json:"iat"`
	Expiry           int64   `json:"exp"` // the end of the claim lease
	GrantID          string  `json:"grant_id"`
	DecisionID       string  `json:"decision_id"`
	DossierID        string  `json:"dossier_id"`
	Binding          Binding `json:"binding"`
	ClaimTokenDigest string  `json:"claim_token_digest"`
	Action           Action  `json:"act"`
}

// Envelope is the verification envelope of a decision, checked by the agent
// pipeline.
type Envelope struct {
	Issuer        string   `json:"iss"`
	Audience      string   `json:"aud"` // AudDecision
	OrgID         string   `json:"org"`
	ID            string   `json:"jti"`
	IssuedAt      int64    `json:"iat"`
	Expiry        int64    `json:"exp"`
	DecisionID    string   `json:"decision_id"`
	DossierID     string   `json:"dossier_id"`
	IntentHash    string   `json:"intent_hash,omitempty"` // absent for decisions without a signed intent
	Outcome       string   `json:"outcome"`
	ReasonCodes   []string `json:"reason_codes"`
	Mode          string   `json:"mode"`
	PolicyVersion string   `json:"policy_version"`
	BundleDigest  string   `json:"bundle_digest"`
	GrantID       string   `json:"grant_id,omitempty"`
}

// KeySet finds the key with a kid that may verify a token at a moment (the
// verifier's clock, VerifyOptions.Now). *KeyRing implements it: a retired
// key verifies until its KeepUntil, a revoked key never.
type KeySet interface {
	Lookup(kid string, at time.Time) (Key, bool)
}

var _ KeySet = (*KeyRing)(nil)

// VerifyOptions are the checks that depend on the verifier.
type VerifyOptions struct {
	// Now is the verifier's clock; required (the zero time is an error). A
	// token is valid iff nbf <= Now < exp, in Unix seconds, with no leeway,
	// and its iat is not after Now + MaxFutureIssuedAt.
	Now time.Time
	// MaxFutureIssuedAt is how far after Now a token's iat may be: the
	// clock skew tolerated between issuer and verifier. 0 tolerates none.
	// A token issued later than that is ErrTokenNotYetValid, whatever its
	// nbf says.
	MaxFutureIssuedAt time.Duration
	// Issuer, when set, must equal the token's iss.
	Issuer string
	// IgnoreExpiry skips the exp check (and only it), for finalizing a claim
	// whose grant expired after it was claimed. Every other check still
	// applies.
	IgnoreExpiry bool
	// IgnoreLifetime skips every check against Now (iat, nbf and exp),
	// for an issuer that identifies a token it recorded while a clock of
	// its own judges what the token may still do (the store's, for a
	// claim's lease): a verifier's clock that jumped must not refuse it.
	// Now still selects the keys (KeySet.Lookup).
	IgnoreLifetime bool
	// Recognize, when set, lets the issuer skip the signature check for a
	// token it minted and recorded itself: it is called with the token's jti
	// (read from the not yet verified payload) and the SHA-256 of the whole
	// token, and returns true only if exactly these bytes were recorded as
	// issued under that jti. Identical bytes carry the signature that was
	// made over them, so only the Ed25519 check is skipped: the kid must
	// still be in the key set and every other check applies. Anyone who does
	// not hold the record of issued tokens leaves it nil.
	Recognize func(jti string, digest [sha256.Size]byte) bool
}

// errNoClock is returned when VerifyOptions.Now is the zero time: a missing
// clock must not make every unexpired token look valid.
var errNoClock = errors.New("grant: VerifyOptions.Now is required")

// Mint signs c as a grant with k: a compact JWS whose protected header is
// {"alg":"EdDSA","kid":k.KID(),"typ":TypGrant}. It signs only what Verify
// would accept at some moment: c.Audience must be AudGrant (the caller fills
// it; ErrTokenAudience otherwise), jti, sub, org, act.type, intent_hash,
// nonce, scope, decision_id and dossier_id are required, iat, nbf and exp
// positive with nbf < exp, digests "sha256:<64 lowercase hex>" and
// payload_profile, when set, PayloadProfile (ErrTokenClaims otherwise).
func Mint(k Key, c Claims) (string, error) {
	if err := c.validate(); err != nil {
		return "", err
	}
	return mint(k, TypGrant, c)
}

// MintAttestation signs a as a claim attestation with k (typ
// TypAttestation). a.Audience must be AudAttestation; jti, org, grant_id,
// claim_token_digest and binding.intent_hash are required, iat and exp
// positive with iat < exp, digests well formed.
func MintAttestation(k Key, a Attestation) (string, error) {
	if err := a.validate(); err != nil {
		return "", err
	}
	return mint(k, TypAttestation, a)
}

// MintEnvelope signs e as a verification envelope with k (typ TypDecision).
// e.Audience must be AudDecision; jti, org, decision_id, dossier_id, outcome
// and mode are required, iat and exp positive with iat < exp, digests well
// formed.
func MintEnvelope(k Key, e Envelope) (string, error) {
	if err := e.validate(); err != nil {
		return "", err
	}
	if e.ReasonCodes == nil {
		e.ReasonCodes = []string{} // [] on the wire, never null
	}
	return mint(k, TypDecision, e)
}

func mint(k Key, typ string, claims any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", tokenError(ErrTokenClaims, "encoding claims: %v", err)
	}
	return signCompact(k, typ, payload)
}

// Verify checks a grant and returns its claims. It requires the compact
// serialization with exactly the header members alg (EdDSA), kid (known to
// keys) and typ (TypGrant); a valid Ed25519 signature; a payload that decodes
// strictly (no duplicate or unknown members) into Claims; aud AudGrant; iss
// o.Issuer when that is set; the claims Mint requires; nbf <= o.Now < exp
// with no leeway; and iat no later than o.Now + o.MaxFutureIssuedAt. Every
// refusal is a *TokenError.
func Verify(token string, keys KeySet, o VerifyOptions) (Claims, error) {
	return verifyKind[Claims](token, TypGrant, keys, o)
}

// VerifyAttestation checks a claim attestation as Verify checks a grant,
// with typ TypAttestation and aud AudAttestation, and valid iff o.Now < exp
// (the end of the claim lease) and iat is not too far ahead (as Verify).
func VerifyAttestation(token string, keys KeySet, o VerifyOptions) (Attestation, error) {
	return verifyKind[Attestation](token, TypAttestation, keys, o)
}

// VerifyEnvelope checks a verification envelope as Verify checks a grant,
// with typ TypDecision and aud AudDecision, and valid iff o.Now < exp and
// iat is not too far ahead (as Verify).
func VerifyEnvelope(token string, keys KeySet, o VerifyOptions) (Envelope, error) {
	return verifyKind[Envelope](token, TypDecision, keys, o)
}

// tokenClaims is what every token kind's claims provide to verifyKind.
type tokenClaims interface {
	Claims | Attestation | Envelope
	validate() error
	// window returns iss, iat, nbf (0: none) and exp.
	window() (iss string, iat, nbf, exp int64)
}

func (c Claims) window() (string, int64, int64, int64) {
	return c.Issuer, c.IssuedAt, c.NotBefore, c.Expiry
}
func (a Attestation) window() (string, int64, int64, int64) { return a.Issuer, a.IssuedAt, 0, a.Expiry }
func (e Envelope) window() (string, int64, int64, int64)    { return e.Issuer, e.IssuedAt, 0, e.Expiry }

// verifyKind is the one verification path of the three kinds: signature and
// typ, strict payload, required claims, issuer, then lifetime.
func verifyKind[T tokenClaims](token, typ string, keys KeySet, o VerifyOptions) (T, error) {
	var zero, c T
	if err := verifyInto(token, typ, keys, o, &c); err != nil {
		return zero, err
	}
	if err := c.validate(); err != nil {
		return zero, err
	}
	iss, iat, nbf, exp := c.window()
	if err := checkIssuer(iss, o); err != nil {
		return zero, err
	}
	if err := checkLifetime(o, iat, nbf, exp); err != nil {
		return zero, err
	}
	return c, nil
}

// verifyInto parses token as a compact JWS of kind typ, checks its signature
// with the key keys holds for its kid, and only then decodes the payload
// into v.
func verifyInto(token, typ string, keys KeySet, o VerifyOptions, v any) error {
	if o.Now.IsZero() {
		return errNoClock
	}
	j, err := parseCompact(token, typ)
	if err != nil {
		return err
	}
	var pub ed25519.PublicKey
	if keys != nil {
		if k, ok := keys.Lookup(j.kid, o.Now); ok && !k.IsZero() {
			pub = k.Public()
		}
	}
	if pub == nil {
		return tokenError(ErrUnknownKey, "kid %q", j.kid)
	}
	if !recognized(token, j, o) {
		if err := verifySignature(j, pub); err != nil {
			return err
		}
	}
	return decodePayload(j.payload, v)
}

// recognized reports whether o.Recognize knows token as one it issued.
func recognized(token string, j compactJWS, o VerifyOptions) bool {
	if o.Recognize == nil {
		return false
	}
	var id struct {
		ID string `json:"jti"`
	}
	if json.Unmarshal(j.payload, &id) != nil || id.ID == "" {
		return false
	}
	return o.Recognize(id.ID, sha256.Sum256([]byte(token)))
}

func checkIssuer(iss string, o VerifyOptions) error {
	if o.Issuer != "" && iss != o.Issuer {
		return tokenError(ErrTokenIssuer, "iss %q, want %q", iss, o.Issuer)
	}
	return nil
}

// checkLifetime applies nbf <= now < exp (nbf 0: no lower bound) in Unix
// seconds, with no leeway, and iat <= now + o.MaxFutureIssuedAt.
func checkLifetime(o VerifyOptions, iat, nbf, exp int64) error {
	if o.IgnoreLifetime {
		return nil
	}
	now := o.Now.Unix()
	if latest := o.Now.Add(max(o.MaxFutureIssuedAt, 0)).Unix(); iat > latest {
		return tokenError(ErrTokenNotYetValid, "iat %d is after now %d plus the allowed clock skew", iat, now)
	}
	if now < nbf {
		return tokenError(ErrTokenNotYetValid, "nbf %d is after now %d", nbf, now)
	}
	if !o.IgnoreExpiry && now >= exp {
		return tokenError(ErrTokenExpired, "exp %d is not after now %d", exp, now)
	}
	return nil
}

func (c Claims) validate() error {
	if c.Audience != AudGrant {
		return tokenError(ErrTokenAudience, "aud %q, want %q", c.Audience, AudGrant)
	}
	if err := required(
		"jti", c.ID, "sub", c.Subject, "org", c.OrgID, "act.type", c.Action.Type, "intent_hash", c.IntentHash,
		"nonce", c.Nonce, "scope", c.Scope, "decision_id", c.DecisionID, "dossier_id", c.DossierID,
	); err != nil {
		return err
	}
	if c.IssuedAt <= 0 || c.NotBefore <= 0 || c.Expiry <= 0 {
		return tokenError(ErrTokenClaims, "iat, nbf and exp are required")
	}
	if c.NotBefore >= c.Expiry || c.IssuedAt >= c.Expiry {
		return tokenError(ErrTokenClaims, "exp %d must be after nbf %d and iat %d", c.Expiry, c.NotBefore, c.IssuedAt)
	}
	if err := digests("intent_hash", c.IntentHash, "payload_digest", c.PayloadDigest,
		"expected_effect_digest", c.ExpectedEffectDigest); err != nil {
		return err
	}
	return profile("payload_profile", c.PayloadProfile)
}

func (a Attestation) validate() error {
	if a.Audience != AudAttestation {
		return tokenError(ErrTokenAudience, "aud %q, want %q", a.Audience, AudAttestation)
	}
	if err := required(
		"jti", a.ID, "org", a.OrgID, "grant_id", a.GrantID, "claim_token_digest", a.ClaimTokenDigest,
		"binding.intent_hash", a.Binding.IntentHash,
	); err != nil {
		return err
	}
	if err := lifetime(a.IssuedAt, a.Expiry); err != nil {
		return err
	}
	if err := digests("claim_token_digest", a.ClaimTokenDigest, "binding.intent_hash", a.Binding.IntentHash,
		"binding.payload_digest", a.Binding.PayloadDigest, "binding.expected_effect_digest", a.Binding.ExpectedEffectDigest); err != nil {
		return err
	}
	return profile("binding.payload_profile", a.Binding.PayloadProfile)
}

func (e Envelope) validate() error {
	if e.Audience != AudDecision {
		return tokenError(ErrTokenAudience, "aud %q, want %q", e.Audience, AudDecision)
	}
	if err := required(
		"jti", e.ID, "org", e.OrgID, "decision_id", e.DecisionID, "dossier_id", e.DossierID,
		"outcome", e.Outcome, "mode", e.Mode,
	); err != nil {
		return err
	}
	if err := lifetime(e.IssuedAt, e.Expiry); err != nil {
		return err
	}
	return digests("intent_hash", e.IntentHash, "bundle_digest", e.BundleDigest)
}

// required takes name, value pairs and fails on the first empty value.
func required(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return tokenError(ErrTokenClaims, "%s is required", pairs[i])
		}
	}
	return nil
}

// digests takes name, value pairs; every non-empty value must be a digest
// string "sha256:<64 lowercase hex>".
func digests(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			continue
		}
		if _, err := canon.ParseDigest(pairs[i+1]); err != nil {
			return tokenError(ErrTokenClaims, "%s is not sha256:<64 lowercase hex>", pairs[i])
		}
	}
	return nil
}

func profile(name, v string) error {
	if v != "" && v != PayloadProfile {
		return tokenError(ErrTokenClaims, "%s %q, want %q", name, v, PayloadProfile)
	}
	return nil
}

func lifetime(iat, exp int64) error {
	if iat <= 0 || exp <= 0 {
		return tokenError(ErrTokenClaims, "iat and exp are required")
	}
	if iat >= exp {
		return tokenError(ErrTokenClaims, "exp %d must be after iat %d", exp, iat)
	}
	return nil
}
