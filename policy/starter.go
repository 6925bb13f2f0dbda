package policy

import "sync"

// starterJSON is the starter policy: amount < 1,000 → ALLOW;
// 1,000 ≤ amount < 10,000 → ESCALATE, or ALLOW when verified approval
// evidence is present; amount ≥ 10,000 → BLOCK; no amount → ESCALATE.
// SHADOW mode; structured predicates only. Exactly one rule matches any
// valid input, so the default is unreachable.
const starterJSON = `{
  "bundle_id": "starter",
  "version": "starter-1",
  "mode": "SHADOW",
  "rules": [
    {"id": "amount-missing",
     "match": [{"field": "amount", "op": "not_exists"}],
     "outcome": "ESCALATE", "reason_codes": ["AMOUNT_MISSING"]},
    {"id": "amount-below-escalation",
     "match": [{"field": "amount", "op": "lt", "value": 1000}],
     "outcome": "ALLOW", "reason_codes": ["AMOUNT_BELOW_ESCALATION_THRESHOLD"]},
    {"id": "amount-escalation-band",
     "match": [{"field": "amount", "op": "ge", "value": 1000},
               {"field": "amount", "op": "lt", "value": 10000},
               {"field": "approval.verified", "op": "eq", "value": false}],
     "outcome": "ESCALATE", "reason_codes": ["AMOUNT_IN_ESCALATION_BAND"]},
    {"id": "amount-escalation-band-approved",
     "match": [{"field": "amount", "op": "ge", "value": 1000},
               {"field": "amount", "op": "lt", "value": 10000},
               {"field": "approval.verified", "op": "eq", "value": true}],
     "outcome": "ALLOW", "reason_codes": ["AMOUNT_IN_ESCALATION_BAND", "APPROVAL_VERIFIED"]},
    {"id": "amount-block",
     "match": [{"field": "amount", "op": "ge", "value": 10000}],
     "outcome": "BLOCK", "reason_codes": ["AMOUNT_AT_OR_ABOVE_BLOCK_THRESHOLD"]}
  ],
  "default": {"outcome": "ESCALATE", "reason_codes": []}
}`

var starter = sync.OnceValue(func() *Compiled {
	c, err := Load([]byte(starterJSON))
	if err != nil {
		panic("policy: starter policy does not compile: " + err.Error())
	}
	return c
})

// Starter returns the compiled starter policy (compiled once, shared).
func Starter() *Compiled { return starter() }

// StarterJSON returns the starter policy's bundle as published: an org
// that installs it (the automation connector does) gets this version.
func StarterJSON() []byte { return []byte(starterJSON) }
