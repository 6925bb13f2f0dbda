# The Clearance starter policy in Rego (OPA v1 syntax). Each Clearance rule
# is a `matched` entry with the same id; its outcome is in `outcomes`. The
# combining rule is Clearance's: the most restrictive outcome among the
# matched rules wins; with no match the default decides.
package clearance.starter

matched contains "amount-missing" if not input.amount

matched contains "amount-below-escalation" if input.amount < 1000

matched contains "amount-escalation-band" if {
	input.amount >= 1000
	input.amount < 10000
	not approved
}

matched contains "amount-escalation-band-approved" if {
	input.amount >= 1000
	input.amount < 10000
	approved
}

matched contains "amount-block" if input.amount >= 10000

approved if input.approval.verified == true

outcomes := {
	"amount-missing": "ESCALATE",
	"amount-below-escalation": "ALLOW",
	"amount-escalation-band": "ESCALATE",
	"amount-escalation-band-approved": "ALLOW",
	"amount-block": "BLOCK",
}

default_outcome := "ESCALATE"

rank := {"ALLOW": 0, "ESCALATE": 1, "REVIEW_REQUIRED": 2, "BLOCK": 3}

by_rank := ["ALLOW", "ESCALATE", "REVIEW_REQUIRED", "BLOCK"]

default outcome := "ESCALATE"

outcome := by_rank[max({rank[outcomes[id]] | some id in matched})] if count(matched) > 0

decision := {
	"outcome": outcome,
	"rules": sort([id | some id in matched; outcomes[id] == outcome]),
}
