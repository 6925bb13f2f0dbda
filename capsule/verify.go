package capsule

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Severity of a finding. Only SeverityError makes a Result not OK.
type Severity string

// Severities.
const (
	SeverityError   Severity = "error"   // gating
	SeverityWarning Severity = "warning" // non-gating defensive assert
	SeverityInfo    Severity = "info"    // informational
)

// Finding is one observation of Class 1 verification.
type Finding struct {
	// Check is the draft §6 check number, 1 to 8. It is 0 for the non-gating
	// disposition-honesty assert, which is not one of the enumerated checks
	// (JSON null).
	Check    int
	Severity Severity
	// Code is a stable label (the reference vectors' labels where they
	// exist); Detail says what exactly was found.
	Code   string
	Detail string
}

// MarshalJSON writes {"check", "severity", "code", "detail"}, with check
// null for Check 0.
func (f Finding) MarshalJSON() ([]byte, error) {
	var check any
	if f.Check != 0 {
		check = f.Check
	}
	return json.Marshal(struct {
		Check    any      `json:"check"`
		Severity Severity `json:"severity"`
		Code     string   `json:"code"`
		Detail   string   `json:"detail"`
	}{check, f.Severity, f.Code, f.Detail})
}

// Derived holds the assurance modes re-derived from the capsule's own
// bytes. AttestationMode is always self_attested: this layer verifies no
// transparency receipt and never derives anchored. CrossPartyRung is set
// only when the capsule has a cross_party block.
type Derived struct {
	AttestationMode AttestationMode `json:"attestation_mode"`
	EffectMode      EffectMode      `json:"effect_mode"`
	LedgerMode      LedgerMode      `json:"ledger_mode"`
	CrossPartyRung  string          `json:"cross_party_rung,omitempty"`
}

// Result is the outcome of Class 1 verification of one capsule. OK gates
// trust in every other field: it is true exactly when no finding has
// SeverityError. Findings come in a fixed order: check 1, the honesty
// assert, checks 2 to 8, then VerifyLedger's concurrent_supersedes. Derived
// is zero when the input is not a JSON object. IDRecomputed is nil
// when the ID cannot be computed (unparseable JSON, a float or unsafe
// integer, a bad canonicalization_id).
type Result struct {
	OK           bool      `json:"ok"`
	Findings     []Finding `json:"findings"`
	Derived      Derived   `json:"derived"`
	IDRecomputed *ID       `json:"capsule_id_recomputed"`
}

// Errors returns the gating findings.
func (r Result) Errors() []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Severity == SeverityError {
			out = append(out, f)
		}
	}
	return out
}

// Verify runs Class 1 verification (draft §6, checks 1 to 8 plus the
// disposition-honesty assert) over one capsule's raw JSON, without a store:
// a chain block yields the informational chain_check_store_level finding,
// since parent existence needs the ledger (VerifyLedger). It never panics
// and never consults a clock, a network or a model.
func Verify(capsule []byte) Result {
	v, err := parseJSON(capsule)
	return verifyValue(v, err, nil)
}

// codeConcurrentSupersedes is the one finding VerifyLedger adds outside the
// per-capsule checks.
const codeConcurrentSupersedes = "concurrent_supersedes"

// VerifyLedger verifies a producer's ledger of capsules, in ledger order,
// with the ledger as the store: a chain parent must be the carried
// capsule_id of a capsule in the ledger, and every supersedes over a parent
// after the first (the authoritative one) is reported as an informational
// concurrent_supersedes finding. Results are in ledger order.
func VerifyLedger(capsules [][]byte) []Result {
	values := make([]any, len(capsules))
	errs := make([]error, len(capsules))
	store := map[string]bool{}
	for i, raw := range capsules {
		values[i], errs[i] = parseJSON(raw)
		if obj, ok := values[i].(map[string]any); ok && errs[i] == nil {
			if id, ok := obj["capsule_id"].(string); ok {
				store[id] = true
			}
		}
	}
	results := make([]Result, len(capsules))
	for i := range capsules {
		results[i] = verifyValue(values[i], errs[i], store)
	}
	superseded := map[string]bool{}
	for i, v := range values {
		obj, ok := v.(map[string]any)
		if !ok || errs[i] != nil {
			continue
		}
		chain, _ := obj["chain"].(map[string]any)
		if chain == nil || chain["relation"] != string(RelationSupersedes) {
			continue
		}
		parent, ok := chain["parent_capsule_id"].(string)
		if !ok {
			continue
		}
		if superseded[parent] {
			results[i].Findings = append(results[i].Findings, Finding{Check: 6, Severity: SeverityInfo, Code: codeConcurrentSupersedes,
				Detail: "a later supersedes over parent " + parent + "; the earliest in ledger order is authoritative (§5.5.4)"})
		}
		superseded[parent] = true
	}
	return results
}

// Registries: the seeded values of draft §12.1. Unregistered values are
// informational, never a rejection.
var registries = []struct {
	name, block, member string
	seeded              map[string]bool
}{
	{"verdict_class", "disposition", "verdict_class", set("executed", "blocked", "hitl_dispatched", "denied", "timeout", "errored",
		"engine_failure", "deferred", "needs_decision", "expired", "escalated", "resolved", "epoch_boundary")},
	{"disposition.decision", "disposition", "decision", set("accept", "reject", "needs_input", "deferred")},
	{"effect.type", "effect", "type", set("write_order", "send_payment")},
	{"irreversibility_class", "effect", "irreversibility_class", set("two_way", "one_way_recoverable", "one_way_consequential", "one_way_terminal")},
	{"effect_attestation", "effect", "effect_attestation", set("gate_executed", "runtime_claimed")},
	{"chain.relation", "chain", "relation", set("confirms", "supersedes", "epoch_opens")},
}

var (
	requiredStrings  = []string{"spec_version", "format_version", "capsule_id", "action_id", "action_type", "operator", "developer", "timestamp"}
	objectBlocks     = []string{"effect", "assurance", "disposition", "chain", "cross_party"}
	approvers        = set(string(ApproverHuman), string(ApproverPolicy), string(ApproverCounterparty))
	effectStatuses   = set("planned", "dispatched", "confirmed", "failed", "reverted")
	attestationModes = map[string]int{"self_attested": 0, "anchored": 1}
	effectModes      = map[string]int{"not_applicable": 0, "dispatched_unconfirmed": 0, "confirmed": 1}
	ledgerModes      = map[string]int{"standalone": 0, "chained": 1, "anchored": 2}
	crossPartyRungs  = map[string]int{"unilateral_fallback": 0, "acknowledged_receipt": 1, "full_bilateral": 2}
	constraintResult = set("pass", "fail", "n/a")
)

func set(values ...string) map[string]bool {
	m := make(map[string]bool, len(values))
	for _, v := range values {
		m[v] = true
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// verifier accumulates findings in check order.
type verifier struct {
	findings []Finding
}

func (v *verifier) add(check int, sev Severity, code, format string, args ...any) {
	v.findings = append(v.findings, Finding{Check: check, Severity: sev, Code: code, Detail: fmt.Sprintf(format, args...)})
}

func (v *verifier) fail(check int, code, format string, args ...any) {
	v.add(check, SeverityError, code, format, args...)
}

func verifyValue(val any, parseErr error, store map[string]bool) (res Result) {
	var v verifier
	defer func() {
		// Verification never panics (§6): a bug here is a failed result.
		if p := recover(); p != nil {
			v.fail(1, "verifier_internal_error", "%v", p)
			res = Result{Findings: v.findings}
		}
		if res.Findings == nil {
			res.Findings = []Finding{}
		}
	}()
	if parseErr != nil {
		v.fail(1, "malformed_json", "capsule is not one strict JSON value: %v", parseErr)
		return Result{Findings: v.findings}
	}
	c, ok := val.(map[string]any)
	if !ok {
		v.fail(1, "not_an_object", "capsule is not a JSON object")
		return Result{Findings: v.findings}
	}
	effect, _ := c["effect"].(map[string]any)
	disposition, _ := c["disposition"].(map[string]any)
	chain, _ := c["chain"].(map[string]any)
	crossParty, _ := c["cross_party"].(map[string]any)
	assurance, _ := c["assurance"].(map[string]any)

	// Check 1: structural.
	for _, f := range requiredStrings {
		switch x, present := c[f]; {
		case !present:
			v.fail(1, "missing_required_field", "%s is REQUIRED (§5.1)", f)
		case !isString(x):
			v.fail(1, "field_not_string", "%s MUST be a string (§5.1)", f)
		}
	}
	carried, _ := c["capsule_id"].(string)
	carriedOK := isHex64(carried)
	if _, present := c["capsule_id"]; present && isString(c["capsule_id"]) && !carriedOK {
		v.fail(1, "capsule_id_malformed", "capsule_id MUST be 64 lowercase hex digits (§5.1)")
	}
	if at, ok := c["action_type"].(string); ok && at != string(ActionDecide) && at != string(ActionFYI) {
		v.fail(1, "action_type_invalid", "action_type MUST be \"fyi\" or \"decide\" (§5.1); got %q", at)
	}
	if ts, ok := c["timestamp"].(string); ok && !validTimestamp(ts) {
		v.fail(1, "timestamp_invalid", "timestamp MUST be RFC 3339 UTC with a \"Z\" suffix (§5.1); got %q", ts)
	}
	cid, cidPresent := c["canonicalization_id"]
	switch fv, _ := c["format_version"].(string); {
	case !isString(c["format_version"]):
		// reported above
	case fv == FormatVersion:
		switch {
		case !cidPresent:
			v.fail(1, "canonicalization_id_missing", "format_version \"4\" REQUIRES canonicalization_id \"jcs\" (§5.1)")
		case !isString(cid):
			v.fail(1, "canonicalization_id_not_string", "canonicalization_id MUST be a string (§5.1)")
		case cid != CanonicalizationJCS:
			v.fail(1, "canonicalization_profile_mismatch", "format_version \"4\" REQUIRES canonicalization_id \"jcs\" (§5.1); got %q", cid)
		}
	case fv == VintageFormatVersion:
		if cidPresent {
			v.fail(1, "canonicalization_profile_mismatch", "format_version \"2\" is the vintage absent-field profile and MUST NOT declare canonicalization_id (§5.1)")
		}
	default:
		v.fail(1, "unsupported_format_version", "format_version %q is not supported; expected \"4\" or vintage \"2\" (§5.1)", fv)
	}
	for _, b := range objectBlocks {
		if x, present := c[b]; present {
			if _, ok := x.(map[string]any); !ok {
				v.fail(1, "block_not_object", "%s MUST be a JSON object when present", b)
			}
		}
	}
	v.checkAssurance(c, assurance, crossParty)
	for _, r := range registries {
		if blk, ok := c[r.block].(map[string]any); ok {
			if x, present := blk[r.member]; present && x != nil && !isString(x) {
				v.fail(1, "field_not_string", "%s.%s MUST be a string", r.block, r.member)
			}
		}
	}
	if effect != nil {
		switch st, present := effect["status"]; {
		case !present:
			v.fail(1, "missing_required_field", "effect.status is REQUIRED (§5.3)")
		case !isString(st) || !effectStatuses[st.(string)]:
			v.fail(1, "effect_status_invalid", "effect.status MUST be planned, dispatched, confirmed, failed or reverted (§5.3); got %v", st)
		}
		v.digestFields("effect", effect, "request_digest", "response_digest")
	}
	if disposition != nil {
		v.digestFields("disposition", disposition, "reason_digest")
	}
	v.checkConstraints(c)
	if crossParty != nil {
		if !isHex64Value(crossParty["initiator_ref"]) {
			v.fail(1, "cross_party_malformed", "cross_party.initiator_ref is REQUIRED and a JSON digest (§5.4.1)")
		}
	}
	numbers := numberProblems(c)
	for _, p := range numbers {
		if p.float {
			v.fail(1, "float_in_digest_field", "floating-point value at %s; digest-bearing material forbids floats (§2)", p.path)
		} else {
			v.fail(1, "unsafe_integer_in_digest_field", "integer outside the safe range ±9007199254740991 at %s; it MUST be a decimal string (§2)", p.path)
		}
	}
	var approver any
	if disposition != nil {
		approver = disposition["approver"]
		switch {
		case approver == nil:
			v.fail(1, "missing_required_field", "disposition.approver is REQUIRED (§5.5)")
		case !isString(approver) || !approvers[approver.(string)]:
			v.fail(1, "approver_invalid", "disposition.approver MUST be human, policy or counterparty (§5.5); got %v", approver)
		}
		if _, present := disposition["decision"]; !present {
			v.fail(1, "missing_required_field", "disposition.decision is REQUIRED (§5.5)")
		}
		switch hd, ok := disposition["human_disposed"].(bool); {
		case !ok:
			v.fail(1, "field_not_bool", "disposition.human_disposed is REQUIRED and boolean (§5.5)")
		case hd && approver != string(ApproverHuman):
			// Disposition honesty (§6): structurally guaranteed for a
			// conforming producer, so a non-gating defensive warning.
			v.add(0, SeverityWarning, "dishonest_human_disposed",
				"human_disposed is true with approver %v; a producer MUST NOT claim a human disposed what a policy did (§5.5)", approver)
		}
	}

	// Check 2: identity.
	var recomputed *ID
	if len(numbers) == 0 {
		id, err := identity(c)
		if err != nil {
			v.fail(2, "capsule_id_uncomputable", "%v", err)
		} else {
			recomputed = &id
			if carriedOK && id.String() != carried {
				v.fail(2, "capsule_id_mismatch", "recomputed %s != carried %s", id, carried)
			}
		}
	}

	// Check 3: confirmed-effect binding (and the rest of Table 3).
	if effect != nil {
		switch effect["status"] {
		case string(EffectConfirmed):
			if !isHex64Value(effect["response_digest"]) {
				v.fail(3, "confirmed_without_response", "effect.status \"confirmed\" requires a 64-hex response_digest over the observed response (§5.3)")
			}
		case string(EffectPlanned):
			if present(effect, "request_digest") || present(effect, "response_digest") {
				v.fail(3, "effect_binding_violation", "effect.status \"planned\": request_digest and response_digest MUST be absent (§5.3)")
			}
		case string(EffectDispatched):
			if present(effect, "response_digest") {
				v.fail(3, "effect_binding_violation", "effect.status \"dispatched\": response_digest MUST be absent (§5.3)")
			}
		}
	}
	effectMode := deriveEffectMode(effect, present(c, "effect"))

	// Check 4: verdict/effect orthogonality.
	var verdict string
	if disposition != nil {
		verdict, _ = disposition["verdict_class"].(string)
	}
	if VerdictClass(verdict).NeverDispatches() && effectMode != EffectModeNotApplicable {
		v.fail(4, "verdict_effect_conflict", "verdict_class %q never dispatches, but derived effect_mode is %q (§5.5.2)", verdict, effectMode)
	}

	// Check 5: effect-attestation matrix.
	attested := effect != nil && present(effect, "effect_attestation")
	switch {
	case effectMode != EffectModeNotApplicable && !attested:
		v.fail(5, "effect_attestation_missing", "effect_attestation REQUIRED for effect_mode %q (§5.3)", effectMode)
	case effectMode == EffectModeNotApplicable && attested:
		v.fail(5, "effect_attestation_present", "effect_attestation MUST be absent for effect_mode \"not_applicable\", including the planned carve (§5.3)")
	}

	// Check 6: chain semantics.
	if chain != nil {
		parent := chain["parent_capsule_id"]
		if !isHex64Value(parent) {
			v.fail(6, "chain_parent_malformed", "chain.parent_capsule_id MUST be a 64-hex Capsule ID (§5.5.4)")
		}
		if !present(chain, "relation") {
			v.fail(6, "missing_required_field", "chain.relation is REQUIRED when a chain block is present (§5.5.4)")
		}
		switch p, _ := parent.(string); {
		case store == nil:
			v.add(6, SeverityInfo, "chain_check_store_level", "chain parent existence and concurrent supersedes are store-level checks (§6); not run without a store")
		case isString(parent) && !store[p]:
			v.fail(6, "chain_parent_missing", "chain parent %s not found in the store (§6)", p)
		}
	}

	// Check 7: assurance reconciliation.
	d := Derived{AttestationMode: SelfAttested, EffectMode: effectMode, LedgerMode: LedgerStandalone}
	if chain != nil {
		d.LedgerMode = LedgerChained
	}
	if crossParty != nil {
		d.CrossPartyRung = deriveCrossPartyRung(crossParty)
	}
	if assurance != nil {
		if s, ok := assurance["effect_mode"].(string); ok && ranked(effectModes, s) > effectModes[string(d.EffectMode)] {
			v.fail(7, "assurance_overclaim", "claimed effect_mode %q but the verifier derived %q (§5.4)", s, d.EffectMode)
		}
		if s, ok := assurance["attestation_mode"].(string); ok && ranked(attestationModes, s) > attestationModes[string(d.AttestationMode)] {
			v.add(7, SeverityInfo, "assurance_overclaim", "claimed attestation_mode %q but no Receipt is verified at this layer (§3.3, §5.4)", s)
		}
		if s, ok := assurance["ledger_mode"].(string); ok && ranked(ledgerModes, s) > ledgerModes[string(d.LedgerMode)] {
			v.add(7, SeverityInfo, "assurance_overclaim", "claimed ledger_mode %q but the verifier derived %q (§5.4)", s, d.LedgerMode)
		}
		if s, ok := assurance["cross_party_rung"].(string); ok && ranked(crossPartyRungs, s) > crossPartyRungs[d.CrossPartyRung] {
			derived := d.CrossPartyRung
			if derived == "" {
				derived = "none (no cross_party block)"
			}
			v.add(7, SeverityInfo, "assurance_overclaim", "claimed cross_party_rung %q but the verifier derived %q (§5.4.1)", s, derived)
		}
	}

	// Check 8: unknown registry values.
	for _, r := range registries {
		blk, ok := c[r.block].(map[string]any)
		if !ok {
			continue
		}
		s, ok := blk[r.member].(string)
		if !ok || r.seeded[s] {
			continue
		}
		v.add(8, SeverityInfo, "unknown_registry_value", "%s.%s=%q is not a seeded %s value; informational, not rejected (§12.1)", r.block, r.member, s, r.name)
		if r.name == "effect_attestation" {
			v.add(8, SeverityInfo, "effect_attestation_graded_floor", "unknown effect_attestation graded no stronger than \"runtime_claimed\" (§5.3)")
		}
	}

	res = Result{OK: true, Findings: v.findings, Derived: d, IDRecomputed: recomputed}
	for _, f := range v.findings {
		if f.Severity == SeverityError {
			res.OK = false
		}
	}
	return res
}

func (v *verifier) checkAssurance(c, assurance, crossParty map[string]any) {
	if !present(c, "assurance") {
		v.fail(1, "missing_required_field", "assurance is REQUIRED: every Capsule carries an assurance object (§5.4)")
		return
	}
	if assurance == nil {
		return // block_not_object
	}
	for _, m := range []struct {
		name   string
		values map[string]int
	}{{"attestation_mode", attestationModes}, {"effect_mode", effectModes}, {"ledger_mode", ledgerModes}} {
		s, ok := assurance[m.name].(string)
		if _, known := m.values[s]; !ok || !known {
			v.fail(1, "assurance_invalid", "assurance.%s MUST be one of %s (§5.4); got %v", m.name, strings.Join(sortedKeys(m.values), ", "), assurance[m.name])
		}
	}
	rung, present := assurance["cross_party_rung"]
	if present {
		if _, known := crossPartyRungs[fmt.Sprint(rung)]; !known || !isString(rung) {
			v.fail(1, "assurance_invalid", "assurance.cross_party_rung MUST be one of %s (§5.4.1); got %v", strings.Join(sortedKeys(crossPartyRungs), ", "), rung)
		}
	}
	if crossParty != nil && !present {
		v.fail(1, "missing_required_field", "assurance.cross_party_rung is REQUIRED when a cross_party block is present (§5.4.1)")
	}
}

func (v *verifier) digestFields(block string, obj map[string]any, names ...string) {
	for _, n := range names {
		if x, ok := obj[n]; ok && !isHex64Value(x) {
			v.fail(1, "digest_malformed", "%s.%s MUST be a JSON digest: 64 lowercase hex digits (§2)", block, n)
		}
	}
}

func (v *verifier) checkConstraints(c map[string]any) {
	x, ok := c["constraints"]
	if !ok {
		return
	}
	list, ok := x.([]any)
	if !ok {
		v.fail(1, "constraints_not_array", "constraints MUST be an array when present (§8.1)")
		return
	}
	for i, e := range list {
		rec, ok := e.(map[string]any)
		if !ok {
			v.fail(1, "constraint_malformed", "constraints[%d] MUST be an object (§8.1)", i)
			continue
		}
		if s, ok := rec["id"].(string); !ok || s == "" {
			v.fail(1, "constraint_malformed", "constraints[%d].id is REQUIRED (§8.1)", i)
		}
		if s, ok := rec["result"].(string); !ok || !constraintResult[s] {
			v.fail(1, "constraint_malformed", "constraints[%d].result MUST be pass, fail or n/a (§8.1)", i)
		}
		if x, ok := rec["evidence_digest"]; ok && !isHex64Value(x) {
			v.fail(1, "digest_malformed", "constraints[%d].evidence_digest MUST be a JSON digest: 64 lowercase hex digits (§8.1)", i)
		}
	}
}

// deriveEffectMode re-derives assurance.effect_mode from the Effect Record
// (draft §5.3, Table 5): no record or planned → not_applicable; confirmed
// with a well-formed response_digest → confirmed; anything else, including
// confirmed without one and unknown statuses → dispatched_unconfirmed (never
// confirmed). A present but non-object effect derives dispatched_unconfirmed:
// unknown never grades down to "nothing happened".
func deriveEffectMode(effect map[string]any, effectPresent bool) EffectMode {
	if effect == nil {
		if effectPresent {
			return EffectModeDispatchedUnconfirmed
		}
		return EffectModeNotApplicable
	}
	switch effect["status"] {
	case string(EffectPlanned):
		return EffectModeNotApplicable
	case string(EffectConfirmed):
		if isHex64Value(effect["response_digest"]) {
			return EffectModeConfirmed
		}
	}
	return EffectModeDispatchedUnconfirmed
}

// deriveCrossPartyRung derives the rung from the block's own bytes (draft
// §5.4.1), never by dereferencing the digests it cites.
func deriveCrossPartyRung(cp map[string]any) string {
	corr, _ := cp["correlator"].(string)
	if !isHex64Value(cp["counterparty_ref"]) || corr == "" {
		return "unilateral_fallback"
	}
	if cp["substantive"] == true {
		return "full_bilateral"
	}
	return "acknowledged_receipt"
}

// ranked returns s's rank, or -1 for a value outside the enum (reported by
// check 1, never as an overclaim).
func ranked(ranks map[string]int, s string) int {
	if r, ok := ranks[s]; ok {
		return r
	}
	return -1
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

// present reports whether obj has member name with a non-null value.
func present(obj map[string]any, name string) bool {
	x, ok := obj[name]
	return ok && x != nil
}

// validTimestamp: RFC 3339, UTC, "Z" suffix.
func validTimestamp(s string) bool {
	if !strings.HasSuffix(s, "Z") {
		return false
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}
