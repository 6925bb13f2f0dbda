package capsule

import (
	"crypto/sha256"
	"fmt"
	"unicode/utf8"

	"github.com/go-json-experiment/json"

	"github.com/clearancehq/clearance/internal/canon"
)

// Sealed is a capsule with its identity: Capsule with CapsuleID set, JSON
// its RFC 8785 canonical bytes (the capsule_id included), and ID.
type Sealed struct {
	Capsule Capsule
	JSON    []byte
	ID      ID
}

// Seal turns c into a format-4 capsule: it sets spec_version,
// format_version and canonicalization_id, derives the assurance block when
// c leaves it zero (self_attested; effect_mode from the Effect Record;
// ledger_mode chained exactly when c has a chain), checks every producer
// invariant of the draft, and computes the Capsule ID over the plain JCS of
// the capsule without capsule_id (draft §5.1). A capsule Seal accepts
// verifies ok; one it cannot vouch for is refused with ErrInvalidCapsule:
// disposition honesty (human_disposed requires approver human), the closed
// approver enum, the confirmed-effect binding and Table 3, the
// effect-attestation matrix and planned carve, verdict/effect
// orthogonality, a stated assurance that is not the derived one (never an
// anchored claim), invalid UTF-8, malformed digests and timestamps.
func Seal(c Capsule) (Sealed, error) {
	if err := prepare(&c); err != nil {
		return Sealed{}, err
	}
	c.CapsuleID = ""
	pre, err := canonicalJSON(c)
	if err != nil {
		return Sealed{}, err
	}
	id := ID(sha256.Sum256(pre))
	c.CapsuleID = id.String()
	out, err := canonicalJSON(c)
	if err != nil {
		return Sealed{}, err
	}
	return Sealed{Capsule: c, JSON: out, ID: id}, nil
}

// canonicalJSON marshals c (json v2 refuses invalid UTF-8) and
// canonicalizes it with internal/canon.
func canonicalJSON(c Capsule) ([]byte, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCapsule, err)
	}
	out, err := canon.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCapsule, err)
	}
	return out, nil
}

func invalidCapsule(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidCapsule, fmt.Sprintf(format, args...))
}

func prepare(c *Capsule) error {
	for _, f := range []struct {
		name, got, want string
	}{
		{"spec_version", c.SpecVersion, SpecVersion},
		{"format_version", c.FormatVersion, FormatVersion},
		{"canonicalization_id", c.CanonicalizationID, CanonicalizationJCS},
	} {
		if f.got != "" && f.got != f.want {
			return invalidCapsule("%s is %q; this producer writes only %q", f.name, f.got, f.want)
		}
	}
	c.SpecVersion, c.FormatVersion, c.CanonicalizationID = SpecVersion, FormatVersion, CanonicalizationJCS
	for _, f := range []struct{ name, v string }{
		{"action_id", c.ActionID}, {"operator", c.Operator}, {"developer", c.Developer}, {"timestamp", c.Timestamp},
	} {
		if f.v == "" {
			return invalidCapsule("%s is required", f.name)
		}
	}
	if c.ActionType != ActionDecide && c.ActionType != ActionFYI {
		return invalidCapsule("action_type %q is not fyi or decide", c.ActionType)
	}
	if !validTimestamp(c.Timestamp) {
		return invalidCapsule("timestamp %q is not RFC 3339 UTC with a Z suffix", c.Timestamp)
	}
	if err := checkDisposition(c.Disposition); err != nil {
		return err
	}
	if err := checkEffect(c.Effect); err != nil {
		return err
	}
	for i, k := range c.Constraints {
		if k.ID == "" || !constraintResult[string(k.Result)] {
			return invalidCapsule("constraints[%d] needs an id and a result of pass, fail or n/a", i)
		}
		if k.EvidenceDigest != "" && !isHex64(k.EvidenceDigest) {
			return invalidCapsule("constraints[%d].evidence_digest is not 64 lowercase hex", i)
		}
	}
	if c.Chain != nil {
		if !isHex64(c.Chain.ParentCapsuleID) {
			return invalidCapsule("chain.parent_capsule_id is not a Capsule ID")
		}
		if c.Chain.Relation == "" {
			return invalidCapsule("chain.relation is required")
		}
	}
	derived := Assurance{AttestationMode: SelfAttested, EffectMode: EffectModeNotApplicable, LedgerMode: LedgerStandalone}
	if c.Effect != nil {
		derived.EffectMode = deriveEffectMode(map[string]any{"status": string(c.Effect.Status), "response_digest": c.Effect.ResponseDigest}, true)
	}
	if c.Chain != nil {
		derived.LedgerMode = LedgerChained
	}
	switch {
	case c.Assurance == (Assurance{}):
		c.Assurance = derived
	case c.Assurance != derived:
		return invalidCapsule("assurance %+v is not what the evidence supports (%+v); a producer MUST NOT record a mode it did not achieve", c.Assurance, derived)
	}
	attested := c.Effect != nil && c.Effect.EffectAttestation != ""
	switch {
	case derived.EffectMode != EffectModeNotApplicable && !attested:
		return invalidCapsule("effect_attestation is required for effect_mode %q", derived.EffectMode)
	case derived.EffectMode == EffectModeNotApplicable && attested:
		return invalidCapsule("effect_attestation must be absent for effect_mode not_applicable (the planned carve)")
	}
	if c.Disposition.VerdictClass.NeverDispatches() && derived.EffectMode != EffectModeNotApplicable {
		return invalidCapsule("verdict_class %q never dispatches but the effect is %q", c.Disposition.VerdictClass, derived.EffectMode)
	}
	return checkUTF8(c)
}

func checkDisposition(d Disposition) error {
	if d.Decision == "" {
		return invalidCapsule("disposition.decision is required")
	}
	if !approvers[string(d.Approver)] {
		return invalidCapsule("disposition.approver %q is not human, policy or counterparty", d.Approver)
	}
	if d.HumanDisposed && d.Approver != ApproverHuman {
		return invalidCapsule("human_disposed true requires approver human, not %q", d.Approver)
	}
	if d.ReasonDigest != "" && !isHex64(d.ReasonDigest) {
		return invalidCapsule("disposition.reason_digest is not 64 lowercase hex")
	}
	return nil
}

func checkEffect(e *Effect) error {
	if e == nil {
		return nil
	}
	if !effectStatuses[string(e.Status)] {
		return invalidCapsule("effect.status %q is not planned, dispatched, confirmed, failed or reverted", e.Status)
	}
	for _, d := range []struct{ name, v string }{{"request_digest", e.RequestDigest}, {"response_digest", e.ResponseDigest}} {
		if d.v != "" && !isHex64(d.v) {
			return invalidCapsule("effect.%s is not 64 lowercase hex", d.name)
		}
	}
	switch e.Status {
	case EffectConfirmed:
		if e.ResponseDigest == "" {
			return invalidCapsule("effect.status confirmed requires a response_digest over the observed response")
		}
	case EffectPlanned:
		if e.RequestDigest != "" || e.ResponseDigest != "" {
			return invalidCapsule("effect.status planned forbids request_digest and response_digest")
		}
	case EffectDispatched:
		if e.ResponseDigest != "" {
			return invalidCapsule("effect.status dispatched forbids response_digest")
		}
	}
	return nil
}

// checkUTF8 refuses invalid UTF-8 in the free-form strings, with the member
// named (json v2 would refuse it too, without saying where).
func checkUTF8(c *Capsule) error {
	fields := []struct{ name, v string }{
		{"action_id", c.ActionID}, {"operator", c.Operator}, {"developer", c.Developer},
		{"epoch_id", c.EpochID}, {"disposition.authority", c.Disposition.Authority},
	}
	if c.Effect != nil {
		fields = append(fields, struct{ name, v string }{"effect.type", c.Effect.Type},
			struct{ name, v string }{"effect.external_ref", c.Effect.ExternalRef},
			struct{ name, v string }{"effect.decision_id", c.Effect.DecisionID})
	}
	for _, f := range fields {
		if !utf8.ValidString(f.v) {
			return invalidCapsule("%s is not valid UTF-8", f.name)
		}
	}
	return nil
}
