package decide

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
)

// Recorded is what a dossier says of the input its decision was evaluated
// with: the members of its body that RecordedInput reads, the scalar ones
// decoded and the others kept as the body's bytes (they alias it), decoded
// when asked for. Replay reads every dossier of a window and most of a
// body (the request as received, the approval's receipt) is not needed.
type Recorded struct {
	DossierID     string
	Route         string
	Intent        jsontext.Value // the recorded intent, canonical JSON
	Outcome       policy.Outcome
	Mode          policy.Mode
	RequestedMode policy.Mode
	CreatedAt     string
	PolicyPin     string

	reasonCodes, matchedRules, snapshot, approval, signals, checkout, spend jsontext.Value
}

// ReasonCodes are the recorded reason codes.
func (r *Recorded) ReasonCodes() ([]string, error) { return decodeStrings(r.reasonCodes) }

// MatchedRules are the recorded matched rules.
func (r *Recorded) MatchedRules() ([]string, error) { return decodeStrings(r.matchedRules) }

// SameReasonCodes reports whether codes are the recorded reason codes,
// without decoding them: reason codes never need escaping, so their JSON
// is their quoted concatenation.
func (r *Recorded) SameReasonCodes(codes []string) bool {
	b := r.reasonCodes
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return false
	}
	b = b[1 : len(b)-1]
	for i, c := range codes {
		if i > 0 {
			if len(b) == 0 || b[0] != ',' {
				return false
			}
			b = b[1:]
		}
		if len(b) < len(c)+2 || b[0] != '"' || string(b[1:1+len(c)]) != c || b[1+len(c)] != '"' {
			return false
		}
		b = b[len(c)+2:]
	}
	return len(b) == 0
}

// Snapshot is the recorded policy snapshot.
func (r *Recorded) Snapshot() (policy.Snapshot, error) {
	var s policy.Snapshot
	if len(r.snapshot) == 0 {
		return s, errors.New("decide: recorded dossier has no policy_snapshot")
	}
	return s, jsonv2.Unmarshal(r.snapshot, &s)
}

func decodeStrings(v jsontext.Value) ([]string, error) {
	var out []string
	if len(v) == 0 {
		return out, nil
	}
	return out, jsonv2.Unmarshal(v, &out)
}

// recordedOptions read stored bodies, which are canonical JSON written by
// this program: the checks a request needs are skipped.
var recordedOptions = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// DecodeRecorded reads the members of a stored dossier body that replay
// needs, skipping the rest without decoding it.
func DecodeRecorded(body []byte) (Recorded, error) {
	var r Recorded
	if scanRecorded(body, &r) {
		return r, nil
	}
	// Not a body this program wrote canonically: read it with a full
	// JSON decoder, which also reports what is wrong with it.
	r = Recorded{}
	if err := readRecorded(body, &r); err != nil {
		return Recorded{}, fmt.Errorf("decide: recorded dossier: %w", err)
	}
	return r, nil
}

// scanRecorded reads a canonical dossier body (RFC 8785, as dossier.Record
// writes it: no whitespace) by skipping values with byte searches; it
// reports false for anything else, which readRecorded then reads.
func scanRecorded(body []byte, r *Recorded) bool {
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return false
	}
	i := 1
	for i < len(body)-1 {
		if i > 1 {
			if body[i] != ',' {
				return false
			}
			i++
		}
		name, n, ok := plainString(body, i)
		if !ok || n >= len(body) || body[n] != ':' {
			return false
		}
		start := n + 1
		end, ok := skipValue(body, start)
		if !ok {
			return false
		}
		v := body[start:end]
		switch string(name) {
		case "dossier_id":
			ok = scalar(v, &r.DossierID)
		case "route":
			ok = scalar(v, &r.Route)
		case "outcome":
			ok = scalar(v, (*string)(&r.Outcome))
		case "mode":
			ok = scalar(v, (*string)(&r.Mode))
		case "requested_mode":
			ok = scalar(v, (*string)(&r.RequestedMode))
		case "created_at":
			ok = scalar(v, &r.CreatedAt)
		case "policy_pin":
			ok = scalar(v, &r.PolicyPin)
		case "intent":
			r.Intent = v
		case "reason_codes":
			r.reasonCodes = v
		case "matched_rules":
			r.matchedRules = v
		case "policy_snapshot":
			r.snapshot = v
		case "approval":
			r.approval = v
		case "signals":
			r.signals = v
		case "checkout":
			r.checkout = v
		case "spend":
			r.spend = v
		}
		if !ok {
			return false
		}
		i = end
	}
	return i == len(body)-1
}

// plainString reads the string at body[i] when it holds no escape; n is
// the index after its closing quote.
func plainString(body []byte, i int) (s []byte, n int, ok bool) {
	if i >= len(body) || body[i] != '"' {
		return nil, 0, false
	}
	j := bytes.IndexByte(body[i+1:], '"')
	if j < 0 {
		return nil, 0, false
	}
	s = body[i+1 : i+1+j]
	if bytes.IndexByte(s, '\\') >= 0 {
		return nil, 0, false
	}
	return s, i + 2 + j, true
}

// scalar sets dst to the plain string v.
func scalar(v []byte, dst *string) bool {
	s, n, ok := plainString(v, 0)
	if !ok || n != len(v) {
		return false
	}
	*dst = string(s)
	return true
}

// skipValue returns the index after the JSON value starting at body[i],
// matching brackets outside strings; it trusts the value to be JSON.
func skipValue(body []byte, i int) (int, bool) {
	depth := 0
	for i < len(body) {
		switch c := body[i]; c {
		case '"':
			for {
				j := bytes.IndexByte(body[i+1:], '"')
				if j < 0 {
					return 0, false
				}
				i += 1 + j
				// An escaped quote has an odd number of backslashes before it.
				k := i - 1
				for k >= 0 && body[k] == '\\' {
					k--
				}
				if (i-1-k)%2 == 0 {
					break
				}
			}
			i++
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i, true
			}
			depth--
			i++
		case ',', ':':
			if depth == 0 {
				return i, true
			}
			i++
		default:
			i++
		}
		if depth == 0 && i < len(body) && (body[i] == ',' || body[i] == '}' || body[i] == ']') {
			return i, true
		}
	}
	return i, depth == 0
}

func readRecorded(body []byte, r *Recorded) error {
	dec := jsontext.NewDecoder(bytes.NewReader(body), recordedOptions)
	if tok, err := dec.ReadToken(); err != nil {
		return err
	} else if tok.Kind() != '{' {
		return errors.New("not an object")
	}
	str := func(dst *string) error {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		if tok.Kind() != '"' {
			return errors.New("a string is expected")
		}
		*dst = tok.String()
		return nil
	}
	// raw is the next value as the bytes of body it spans.
	raw := func(dst *jsontext.Value) error {
		start := dec.InputOffset()
		if err := dec.SkipValue(); err != nil {
			return err
		}
		*dst = bytes.TrimLeft(body[start:dec.InputOffset()], ": \t\r\n")
		return nil
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		name := tok.String()
		switch name {
		case "dossier_id":
			err = str(&r.DossierID)
		case "route":
			err = str(&r.Route)
		case "outcome":
			err = str((*string)(&r.Outcome))
		case "mode":
			err = str((*string)(&r.Mode))
		case "requested_mode":
			err = str((*string)(&r.RequestedMode))
		case "created_at":
			err = str(&r.CreatedAt)
		case "policy_pin":
			err = str(&r.PolicyPin)
		case "intent":
			err = raw(&r.Intent)
		case "reason_codes":
			err = raw(&r.reasonCodes)
		case "matched_rules":
			err = raw(&r.matchedRules)
		case "policy_snapshot":
			err = raw(&r.snapshot)
		case "approval":
			err = raw(&r.approval)
		case "signals":
			err = raw(&r.signals)
		case "checkout":
			err = raw(&r.checkout)
		case "spend":
			err = raw(&r.spend)
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	_, err := dec.ReadToken()
	return err
}

// ErrNotReplayable is a recorded decision whose input cannot be rebuilt
// exactly; the *NotReplayable error says why.
var ErrNotReplayable = errors.New("decide: recorded decision cannot be replayed")

// NotReplayable names why a recorded decision cannot be evaluated again.
type NotReplayable struct {
	Reason string // a stable code, e.g. SIGNALS_NOT_RECORDED
	Detail string
}

func (e *NotReplayable) Error() string {
	return "decide: not replayable: " + e.Reason + ": " + e.Detail
}
func (e *NotReplayable) Is(target error) bool { return target == ErrNotReplayable }

// Reasons a recorded decision is not replayed.
const (
	// ReasonCheckoutNotReplayed: a UCP checkout decision and no checkout
	// reader (RecordSources.Checkout) to rebuild its input.
	ReasonCheckoutNotReplayed = "CHECKOUT_NOT_REPLAYED"
	// ReasonSignalsNotRecorded: the policy evaluated again reads inbound
	// signals and the dossier recorded none (its own policy read none), so
	// what the org's signals were then is unknown.
	ReasonSignalsNotRecorded = "SIGNALS_NOT_RECORDED"
	// ReasonSubjectErased: the dossier's personal data was sealed and its
	// data subject erased since: the recorded intent is gone for good.
	ReasonSubjectErased = "SUBJECT_ERASED"
	// ReasonRouteUnknown: a route this version does not know.
	ReasonRouteUnknown = "ROUTE_UNKNOWN"
	// ReasonMalformed: the recorded intent no longer decodes.
	ReasonMalformed = "RECORD_MALFORMED"
)

// RecordSources give RecordedInput what a dossier names but does not hold.
type RecordSources struct {
	// Signals reads the recorded signal events (nil: a policy that reads
	// signals replays nothing).
	Signals SignalData
	// Checkout rebuilds a UCP checkout decision's input from the recorded
	// checkout (the dossier's intent) and its recorded verification (the
	// dossier's checkout member): the checkout feature's RecordedInput.
	// nil: checkout decisions are not replayed.
	Checkout func(checkout, evidence json.RawMessage, now time.Time) (policy.Input, error)
}

// SignalData returns the data of the signals a dossier recorded, by event
// id, as a policy evaluated again needs them; the signals feature answers
// it from the events it keeps (core.ErrNotFound when one is gone).
type SignalData func(used []dossier.Signal) (map[string]json.RawMessage, error)

// RecordedInput rebuilds the policy input r's decision was evaluated with,
// from the exact recorded intent, its route's decoding, the recorded
// approval and mode, and the decision time as evaluation time. Signals are
// rebuilt with src.Signals (the events the dossier names) when the policy to
// evaluate reads them (usesSignals); a decision whose dossier recorded none
// is then not replayable. A UCP checkout's input is rebuilt by
// src.Checkout.
func RecordedInput(r *Recorded, usesSignals bool, src RecordSources) (policy.Input, error) {
	var in policy.Input
	now, err := time.Parse(time.RFC3339Nano, r.CreatedAt)
	if err != nil {
		return in, &NotReplayable{Reason: ReasonMalformed, Detail: "created_at: " + err.Error()}
	}
	route := Route(r.Route)
	switch {
	case route.known():
		body, err := decode(route, r.Intent, "", strictjson.Options{RejectUnknown: true})
		if err != nil {
			return in, &NotReplayable{Reason: ReasonMalformed, Detail: err.Error()}
		}
		if in, err = body.intent.Input(now); err != nil {
			return in, &NotReplayable{Reason: ReasonMalformed, Detail: err.Error()}
		}
		in.Extra = body.extra
	case route == RouteEnforceAndBind || route == RouteManagedEscalation:
		var intent ExecutionIntent
		if err := strictjson.Decode(r.Intent, &intent, strictjson.Options{RejectUnknown: true}); err != nil {
			return in, &NotReplayable{Reason: ReasonMalformed, Detail: err.Error()}
		}
		if in, err = IntentInput(intent, r.RequestedMode, now); err != nil {
			return in, &NotReplayable{Reason: ReasonMalformed, Detail: err.Error()}
		}
	case route == RouteUCPCheckout:
		if src.Checkout == nil || len(r.checkout) == 0 {
			return in, &NotReplayable{Reason: ReasonCheckoutNotReplayed,
				Detail: "no checkout reader, or the dossier records no checkout verification"}
		}
		if in, err = src.Checkout(json.RawMessage(r.Intent), json.RawMessage(r.checkout), now); err != nil {
			return in, &NotReplayable{Reason: ReasonMalformed, Detail: err.Error()}
		}
	default:
		return in, &NotReplayable{Reason: ReasonRouteUnknown, Detail: "route " + r.Route}
	}
	if len(r.approval) > 0 && string(r.approval) != "null" {
		var a dossier.Approval
		if err := jsonv2.Unmarshal(r.approval, &a, jsonv2.RejectUnknownMembers(false)); err != nil {
			return in, &NotReplayable{Reason: ReasonMalformed, Detail: "approval: " + err.Error()}
		}
		in.Approval = &policy.Approval{Verified: true, ApproverID: a.Approver, Method: a.Presence}
	}
	if len(r.spend) > 0 {
		// The budgets as the decision saw them: a candidate's gate of the
		// same id counts from there, any other from an unused budget.
		var checks []dossier.SpendCheck
		if err := jsonv2.Unmarshal(r.spend, &checks); err != nil {
			return in, &NotReplayable{Reason: ReasonMalformed, Detail: "spend: " + err.Error()}
		}
		in.Spend = make(map[string]policy.SpendStatus, len(checks))
		for _, c := range checks {
			limit, okL := policy.Decimal(c.Limit).Micros()
			used, okU := policy.Decimal(c.Used).Micros()
			if !okL || !okU {
				return in, &NotReplayable{Reason: ReasonMalformed, Detail: "spend: amounts are not decimals"}
			}
			in.Spend[c.GateID] = policy.SpendStatus{Currency: c.Currency, Limit: limit, Used: used}
		}
	}
	if usesSignals {
		var used []dossier.Signal
		if len(r.signals) > 0 {
			if err := jsonv2.Unmarshal(r.signals, &used); err != nil {
				return in, &NotReplayable{Reason: ReasonMalformed, Detail: "signals: " + err.Error()}
			}
		}
		if len(used) == 0 {
			return in, &NotReplayable{Reason: ReasonSignalsNotRecorded,
				Detail: "the policy reads inbound signals and the decision recorded none"}
		}
		if in.Signals, err = recordedSignals(used, now, src.Signals); err != nil {
			return in, err
		}
	}
	return in, nil
}

// recordedSignals rebuilds policy.Input.Signals from the recorded events,
// ages counted at the decision time, as signals.Current built them then.
func recordedSignals(used []dossier.Signal, now time.Time, data SignalData) (map[string]any, error) {
	if data == nil {
		return nil, &NotReplayable{Reason: ReasonSignalsNotRecorded, Detail: "no signal store to read the recorded events from"}
	}
	raw, err := data(used)
	if core.IsNotFound(err) {
		return nil, &NotReplayable{Reason: ReasonSignalsNotRecorded, Detail: "a recorded signal event is no longer kept"}
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(used))
	for _, sg := range used {
		ts, err := time.Parse(time.RFC3339Nano, sg.Timestamp)
		if err != nil {
			return nil, &NotReplayable{Reason: ReasonMalformed, Detail: "signal timestamp: " + err.Error()}
		}
		var d map[string]any
		if err := json.Unmarshal(raw[sg.EventID], &d); err != nil {
			return nil, &NotReplayable{Reason: ReasonMalformed, Detail: "signal data: " + err.Error()}
		}
		out[sg.Type] = map[string]any{
			policy.SignalData:       d,
			policy.SignalTimestamp:  sg.Timestamp,
			policy.SignalReceivedAt: sg.ReceivedAt,
			policy.SignalAgeSeconds: max(0, now.Sub(ts).Seconds()),
		}
	}
	return out, nil
}
