package decide

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// draft is a request evaluated and ready to record: everything a dossier
// says, whichever route it came through.
type draft struct {
	route        Route
	org          string
	intent       json.RawMessage // canonical JSON of what was evaluated
	bound        json.RawMessage // what a grant keeps to evaluate again (BoundIntent); nil: intent
	asReceived   string          // the request exactly as received
	intentDigest string          // SHA-256 of intent: the idempotency digest too
	in           policy.Input
	principal    core.Principal
	key          string // the Idempotency-Key (the intent_id of a signed intent)
	corr         string
	requestID    string
	parent       string              // parent_decision_id
	parentChain  string              // the parent's chain; "" without a parent
	pin          string              // context.policy_version
	federation   []dossier.Federated // verified federated decisions (in.Federation)
	res          policy.Resolution
	// seen: res came from ResolveSeen, so record confirms it with
	// Policies.Current before writing (errPolicyMoved when it moved).
	seen bool
	now  time.Time
}

// evaluate runs the resolved policy over the draft's input and returns the
// dossier it records, its ids taken from ids (dossier, decision,
// evaluation).
func (dr *draft) evaluate(ids []string) (dossier.Body, policy.Decision) {
	c := dr.res.Policy
	pd := c.Evaluate(&dr.in)
	mode := dr.res.Mode(dr.in.RequestedMode) // SHADOW unless c is the active version
	d := dossier.Body{
		DossierID: ids[0], DecisionID: ids[1], EvaluationID: ids[2], OrgID: dr.org, Route: string(dr.route),
		IntentAsReceived: dr.asReceived, IntentDigest: dr.intentDigest, IntentProfile: canon.Profile,
		Outcome: pd.Outcome, ReasonCodes: pd.ReasonCodes, MatchedRules: nonNil(pd.MatchedRules),
		PolicySnapshot: c.Snapshot(), Mode: mode, RequestedMode: dr.in.RequestedMode, BundleMode: c.Mode(),
		Actor: dossier.Actor{CredentialID: dr.principal.KeyID, CredentialKind: string(dr.principal.Kind),
			ID: dr.in.ActorID, Type: dr.in.ActorType},
		IdempotencyKey: dr.key, CorrelationID: dr.corr, RequestID: dr.requestID,
		CreatedAt: dr.now.Format(core.TimeFormat), ParentDecisionID: dr.parent,
	}
	d.SetCanonicalIntent(dr.intent) // canonical by construction (draft.intent)
	d.Federation = dr.federation
	d.ChainID = chainFor(dr.org, dr.parentChain, dr.in.WorkflowKey, dr.corr, d.DecisionID)
	if !dr.res.Authorizes() {
		// A pin selected another version than the active one: evaluated and
		// recorded under the pin, in SHADOW.
		d.PolicyPin, d.ActivePolicyVersion = dr.pin, dr.res.Active.Snapshot().PolicyVersion
	}
	if pd.Err != nil {
		d.EvaluationError = pd.Err.Error()
	}
	return d, pd
}

// record is THE record path of every decision: in one transaction of the
// org it replays the answer recorded under the draft's key for the same
// request, or writes the dossier with its ledger entry and chain member,
// lets answer add what the route binds to it (a grant) and build the
// answer, and remembers that answer under the key. It reports whether the
// answer was replayed. Nothing is answered before it is durable. answer
// gets the Sealer of a decision whose dossier was sealed (else nil): what
// it writes of the decision's personal data, it seals with it.
func record[T any](ctx context.Context, s *Service, dr *draft, d *dossier.Body, out *T,
	answer func(tx store.Tx, digest string, seal dossier.Sealer) (T, error)) (bool, error) {
	scope := string(dr.route)
	var replayed bool
	err := s.d.Store.Update(ctx, dr.org, func(tx store.Tx) error {
		var zero T
		*out = zero
		var err error
		if replayed, err = idempotency.Replay(ctx, tx, scope, dr.key, dr.intentDigest, out); err != nil || replayed {
			return err
		}
		if dr.seen {
			current, err := s.cfg.Policies.Current(ctx, tx, dr.res)
			if err != nil {
				return err
			}
			if !current {
				return errPolicyMoved
			}
		}
		stored := d
		var seal dossier.Sealer
		if s.cfg.Personal != nil {
			sealed, sealer, err := s.cfg.Personal.Seal(ctx, tx, d)
			if err != nil {
				return err
			}
			if sealed != nil {
				stored, seal = sealed, sealer
			}
		}
		digest, err := dossier.Record(ctx, tx, stored, dossier.Index{WorkflowKey: dr.in.WorkflowKey, DecisionType: dr.in.DecisionType}, dr.now)
		if err != nil {
			return err
		}
		d.LedgerSeq = stored.LedgerSeq
		if *out, err = answer(tx, digest, seal); err != nil {
			return err
		}
		return idempotency.Remember(ctx, tx, scope, dr.key, dr.intentDigest, *out, dr.now)
	})
	return replayed, err
}

// errPolicyMoved is a draft resolved under an active version that is not
// the org's any more: it is evaluated again under the current one.
var errPolicyMoved = errors.New("decide: the org's active policy version moved")

// newIDs returns n fresh ids.
func (s *Service) newIDs(n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		var err error
		if ids[i], err = s.d.IDs.New(); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// boundIntent is what the draft's grant keeps of its intent.
func (dr *draft) boundIntent() json.RawMessage {
	if dr.bound != nil {
		return dr.bound
	}
	return dr.intent
}
