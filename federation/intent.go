package federation

import (
	"maps"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/policy"
)

// federatedIntent is the intent as policies see it, without what is local
// to one deployment (the org, ids, nonces, the requested mode, a
// context.policy_version pin, the evaluation time, evidence): two
// deployments deciding the same action for the same actor compute the same
// digest, whichever route or body shape carried it.
type federatedIntent struct {
	DecisionType     string         `json:"decision_type,omitempty"`
	WorkflowKey      string         `json:"workflow_key,omitempty"`
	Surface          string         `json:"surface,omitempty"`
	VerticalPack     string         `json:"vertical_pack,omitempty"`
	ObjectiveProfile string         `json:"objective_profile,omitempty"`
	Amount           *float64       `json:"amount,omitempty"`
	RiskScore        *float64       `json:"risk_score,omitempty"`
	Actor            actor          `json:"actor"`
	Action           action         `json:"action"`
	Context          map[string]any `json:"context,omitempty"`
	Extra            map[string]any `json:"extra,omitempty"`
}

type actor struct {
	ID   string `json:"id,omitempty"`
	Type string `json:"type,omitempty"`
}

type action struct {
	Type       string         `json:"type,omitempty"`
	Target     string         `json:"target,omitempty"`
	Currency   string         `json:"currency,omitempty"`
	Parameters map[string]any `json:"parameters,omitempty"`
}

// IntentDigest is the digest of in under IntentProfile: SHA-256 of the RFC
// 8785 JSON of {decision_type, workflow_key, surface, vertical_pack,
// objective_profile, amount, risk_score, actor {id, type}, action {type,
// target, currency, parameters}, context without policy_version, extra},
// empty members omitted. Amounts are numbers, so 120.50 and 120.5 agree.
func IntentDigest(in *policy.Input) (string, error) {
	f := federatedIntent{
		DecisionType: in.DecisionType, WorkflowKey: in.WorkflowKey, Surface: in.Surface,
		VerticalPack: in.VerticalPack, ObjectiveProfile: in.ObjectiveProfile,
		Actor:  actor{ID: in.ActorID, Type: in.ActorType},
		Action: action{Type: in.ActionType, Target: in.ActionTarget, Currency: in.Currency, Parameters: in.ActionParameters},
		Extra:  in.Extra,
	}
	if in.HasAmount {
		f.Amount = &in.Amount
	}
	if in.HasRiskScore {
		f.RiskScore = &in.RiskScore
	}
	if _, pinned := in.Context["policy_version"]; pinned {
		f.Context = maps.Clone(in.Context)
		delete(f.Context, "policy_version")
	} else {
		f.Context = in.Context
	}
	return canon.DigestValue(f)
}
