// Package spend keeps the budgets of spend-control gates (policy.SpendGate):
// how much of each gate's budget the org's claimed actions reserved,
// committed and hold in each window.
//
// # Contract
//
// A budget is counted per gate id, currency, partition (a keyed reference
// to the actor of a per-actor gate) and window (its calendar period, by
// the store's clock) in one usage record of the org. Every charge counts
// in the window of each kind (hour, day, week, month) that holds its
// claim, so that a later version of a gate with another window continues
// from what was spent; a currency is never converted, so another currency
// is another budget. Reserve runs in the claim's transaction: the
// org's transactions are serialized on every backend (one writer per org on
// Pebble; the org's row lock on PostgreSQL, across servers), so two claims
// can never both fit into what is left of a budget. It refuses the claim
// with SPEND_LIMIT_EXCEEDED (409) when an amount does not fit, and writes
// a reservation record under the grant id naming what it charged.
//
// Settle runs in the transaction that records the grant's outcome and
// moves its reservation on: COMMITTED commits the amount, FAILED releases
// it, INDETERMINATE holds it until the execution is reconciled (held
// amounts still count as used, so an unknown outcome never frees budget),
// and reconciling a held one commits or releases it. A grant without a
// reservation is left alone; settling twice changes nothing.
//
// Status gives evaluations what is used of the gates that apply to an
// input (committed reads, before any lock: the reservation at claim is
// what holds the line, the status only lets policy and enforce-and-bind
// see the budget) and what a dossier records of it.
package spend
