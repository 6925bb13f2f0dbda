package dossier

import (
	"strconv"
	"unicode/utf8"

	"github.com/clearancehq/clearance/internal/canon"
)

// canonical returns the RFC 8785 canonical JSON of b, written directly
// (members in the order of their names, strings escaped as the RFC says),
// which is what canon.Marshal(b) returns, in a fifth of its time: every
// decision writes one. ok is false when b holds what the direct writer does
// not: a string that is not UTF-8, a ledger seq above 2^53, a checkout or
// spend checks or sealed personal data; the caller then uses canon.Marshal.
// The intent is canonicalized on its own.
func (b *Body) canonical() (out []byte, ok bool, err error) {
	// Checkouts, gated amounts, federation and sealed dossiers are rare: canon.Marshal writes them.
	if b.LedgerSeq > canon.MaxExactInteger || b.Checkout != nil || b.Spend != nil || b.PersonalData != nil || len(b.Federation) > 0 {
		return nil, false, nil
	}
	intent := []byte("null")
	switch {
	case b.Intent != nil && b.intentCanonical:
		intent = b.Intent
	case b.Intent != nil:
		if intent, err = canon.Transform(b.Intent); err != nil {
			return nil, false, err
		}
	}
	size := 1152 + len(intent) + 2*len(b.IntentAsReceived) + len(b.EvaluationError)
	if b.Approval != nil {
		size += 256 + len(b.Approval.Receipt)
	}
	for _, v := range b.ReasonCodes {
		size += len(v) + 3
	}
	for _, v := range b.MatchedRules {
		size += len(v) + 3
	}
	for _, v := range b.Signals {
		size += 224 + len(v.Type)
	}
	w := jcsWriter{buf: make([]byte, 0, size), ok: true}
	w.raw(`{`)
	if b.ActivePolicyVersion != "" { // "active_…" sorts before "actor"
		w.raw(`"active_policy_version":`)
		w.str(b.ActivePolicyVersion)
		w.raw(`,`)
	}
	w.raw(`"actor":{"credential_id":`)
	w.str(b.Actor.CredentialID)
	w.raw(`,"credential_kind":`)
	w.str(b.Actor.CredentialKind)
	w.opt("id", b.Actor.ID)
	w.opt("type", b.Actor.Type)
	w.raw(`}`)
	if a := b.Approval; a != nil { // "approval" sorts after "actor"
		w.raw(`,"approval":{"approver":`)
		w.str(a.Approver)
		w.member("decided_at", a.DecidedAt)
		w.member("issuer", a.Issuer)
		w.member("presence", a.Presence)
		w.member("receipt", a.Receipt)
		w.member("receipt_id", a.ReceiptID)
		w.member("request_id", a.RequestID)
		w.raw(`}`)
	}
	w.member("bundle_mode", string(b.BundleMode))
	w.opt("chain_id", b.ChainID)
	w.opt("correlation_id", b.CorrelationID)
	w.member("created_at", b.CreatedAt)
	w.member("decision_id", b.DecisionID)
	w.member("dossier_id", b.DossierID)
	w.opt("escalation_id", b.EscalationID)
	w.opt("evaluation_error", b.EvaluationError)
	w.member("evaluation_id", b.EvaluationID)
	w.opt("grant_id", b.GrantID)
	w.opt("idempotency_key", b.IdempotencyKey)
	w.raw(`,"intent":`)
	w.buf = append(w.buf, intent...)
	w.member("intent_as_received", b.IntentAsReceived)
	w.member("intent_digest", b.IntentDigest)
	w.member("intent_digest_profile", b.IntentProfile)
	w.raw(`,"ledger_seq":`)
	w.buf = strconv.AppendUint(w.buf, b.LedgerSeq, 10)
	w.list("matched_rules", b.MatchedRules)
	w.member("mode", string(b.Mode))
	w.member("org_id", b.OrgID)
	w.member("outcome", string(b.Outcome))
	w.opt("parent_decision_id", b.ParentDecisionID)
	w.opt("policy_pin", b.PolicyPin)
	w.raw(`,"policy_snapshot":{"bundle_digest":`)
	w.str(b.PolicySnapshot.BundleDigest)
	w.member("bundle_id", b.PolicySnapshot.BundleID)
	w.member("evaluator", b.PolicySnapshot.Evaluator)
	w.member("policy_version", b.PolicySnapshot.PolicyVersion)
	w.opt("source_commit", b.PolicySnapshot.SourceCommit)
	w.raw(`}`)
	w.list("reason_codes", b.ReasonCodes)
	w.opt("request_id", b.RequestID)
	w.opt("requested_mode", string(b.RequestedMode))
	w.member("route", b.Route)
	if len(b.Signals) > 0 { // "signals" sorts after "route"
		w.raw(`,"signals":[`)
		for i, sg := range b.Signals {
			if i > 0 {
				w.raw(`,`)
			}
			w.raw(`{"data_digest":`)
			w.str(sg.DataDigest)
			w.member("event_id", sg.EventID)
			w.member("received_at", sg.ReceivedAt)
			w.member("timestamp", sg.Timestamp)
			w.member("type", sg.Type)
			w.raw(`}`)
		}
		w.raw(`]`)
	}
	w.raw(`}`)
	return w.buf, w.ok, nil
}

// jcsWriter appends canonical JSON; ok turns false on a string it cannot
// write as RFC 8785 would (not UTF-8).
type jcsWriter struct {
	buf []byte
	ok  bool
}

func (w *jcsWriter) raw(s string) { w.buf = append(w.buf, s...) }

// member writes ,"name":"v".
func (w *jcsWriter) member(name, v string) {
	w.buf = append(w.buf, ',', '"')
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, '"', ':')
	w.str(v)
}

// opt is member for an omitempty field.
func (w *jcsWriter) opt(name, v string) {
	if v != "" {
		w.member(name, v)
	}
}

// list writes ,"name":[…], or null for a nil slice (as encoding/json does).
func (w *jcsWriter) list(name string, vs []string) {
	w.buf = append(w.buf, ',', '"')
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, '"', ':')
	if vs == nil {
		w.raw("null")
		return
	}
	w.buf = append(w.buf, '[')
	for i, v := range vs {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		w.str(v)
	}
	w.buf = append(w.buf, ']')
}

// str writes s as an RFC 8785 string (canon.AppendString); a string that
// is not UTF-8 is left to canon.Marshal.
func (w *jcsWriter) str(s string) {
	if !utf8.ValidString(s) {
		w.ok = false
		return
	}
	w.buf = canon.AppendString(w.buf, s)
}
