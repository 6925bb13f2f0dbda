// Package policy compiles policy bundles and evaluates decision inputs
// against them: ALLOW, ESCALATE, REVIEW_REQUIRED or BLOCK.
//
// The package is pure: it does no I/O, keeps no global state beyond
// memoised constants (the CEL environment, the starter policy), and never
// reads the clock or a random source; the evaluation time is Input.Now.
//
// # Bundles
//
// A bundle (DESIGN §8) is {bundle_id, version, mode, rules[], default}.
// Load strictly decodes JSON (a *strictjson.Error means 400) and Compile
// validates (a *ValidationError listing every Problem means 422), compiles
// and indexes it. The digest is "sha256:" + hex SHA-256 of the RFC 8785 form
// of the bundle as re-marshalled, so whitespace and member order do not
// change it; Canonical returns those bytes and Load(Canonical()) reproduces
// the digest. A *Compiled is immutable and safe for concurrent use.
//
// Validation: bundle_id 1..200 bytes; version 1..100 of [A-Za-z0-9._-];
// mode ENFORCEMENT or SHADOW; at most 10,000 rules with unique non-empty
// ids; valid outcomes; reason codes ^[A-Z][A-Z0-9_]*$, at least one per
// rule, none of the evaluator's own (PROTOCOL_OUTCOME_*, POLICY_MATCHED,
// NO_RULE_MATCHED, EVALUATION_ERROR); selector values that follow the
// grammar of their member (below); known predicate fields and ops with
// values of the field's type; `when` must type-check as bool.
//
// # Rules
//
// A rule matches when each non-empty selector (decision_types,
// workflow_keys, surfaces) contains the input's value, every structured
// predicate in match holds, and then, only if all of that holds, its CEL
// `when` is true. A rule without conditions matches everything.
//
// Structured predicates {field, op, value} are compiled to native Go and
// allocate nothing. Fields: decision_type workflow_key surface vertical_pack
// objective_profile currency actor.id actor.type action.type action.target
// mode (strings), amount risk_score (numbers), approval.verified (boolean),
// and context.<key> (a top-level key of the request context; string, number
// or boolean). Ops: eq ne lt le gt ge in not_in exists not_exists; lt..ge
// need a number, in/not_in a non-empty array. Absence: an empty string
// field, a missing amount or risk score, and a missing or null context key
// are absent, and an absent value satisfies only not_exists. ne and not_in
// are the negations of eq and in over present values, so a context value of
// another type satisfies ne. approval.verified is false without evidence;
// exists on it means evidence was supplied. spend.<gate>.limit, .used and
// .remaining (numbers) read the budget of a spend gate (see SpendGate),
// absent when the gate does not apply.
//
// CEL `when` expressions see intent (map: decision_type, workflow_key,
// surface, vertical_pack, objective_profile, mode, context, actor{id,type},
// action{type,currency,target,parameters,amount?}, amount and risk_score
// only when present, plus Input.Extra members), signals (map), spend (map
// of gate id to {limit, used, remaining, currency}), approval (null or
// {verified, approver_id, method}), federation (list of verified federated
// decisions, see FederatedDecision; empty without any) and now (timestamp,
// UTC accessors). int and double compare with each other. Each evaluation is
// limited to MaxRuleCost and one Evaluate to MaxEvaluationCost.
//
// # Combining
//
// Every matching rule contributes; the most restrictive outcome wins
// (ALLOW < ESCALATE < REVIEW_REQUIRED < BLOCK). A bundle's spend gates
// then turn an ALLOW that does not fit a budget into the gate's outcome
// with [PROTOCOL_OUTCOME_<outcome>, SPEND_LIMIT_EXCEEDED] (see SpendGate). Reason codes are
// [PROTOCOL_OUTCOME_<outcome>, POLICY_MATCHED] followed by the codes of
// every rule with the winning outcome, in rule order, deduplicated; with no
// match they are [PROTOCOL_OUTCOME_<default>, NO_RULE_MATCHED] followed by
// the default's codes. Any evaluation error (CEL runtime error, cost limit,
// an invalid Input) fails closed: BLOCK with [PROTOCOL_OUTCOME_BLOCK,
// EVALUATION_ERROR] and Decision.Err set. Every candidate rule is evaluated,
// so an error in any reachable `when` blocks even if another rule already
// matched.
//
// Decisions share precomputed slices: when one rule wins or the default
// decides, Evaluate of a bundle without CEL allocates nothing. Callers must
// treat ReasonCodes and MatchedRules as read-only.
//
// # Index
//
// Each rule with selectors is filed under its most selective dimension
// (fewest values) in a map from value to rule positions; Evaluate merges the
// lists for the input's decision_type, workflow_key and surface with the
// unindexed rules, in rule order, so a large bundle costs about what its
// candidate rules cost.
//
// # Input
//
// DecodeIntent reads the unified wire shape (Intent) strictly, and
// Intent.Input maps it to an Input. Amounts must be plain JSON number
// literals: no sign, no exponent, at most 6 significant fractional digits,
// at most MaxAmount; null, booleans and strings are INVALID_AMOUNT.
// action.amount stands for amount when amount is absent; both present and
// different is AMOUNT_CONFLICT.
//
// The names rules select on have ASCII grammars, so that a look-alike (a
// zero-width space, a bidi override, a trailing space, a homoglyph, another
// case) is INVALID_IDENTIFIER rather than a name no rule selects:
// decision_type is upper snake case (ValidDecisionType), workflow_key
// ^[A-Za-z0-9][A-Za-z0-9._:/-]*$ up to 128 bytes (ValidWorkflowKey),
// surface ^[a-z][a-z0-9_]*$ up to 80 bytes (ValidSurface). The other names
// (actor, action, vertical_pack, objective_profile) are at most
// MaxIdentifierLen bytes without control characters.
//
// # Explanations and diffs
//
// Compiled.Explain decides an input exactly as Evaluate does (its outcome,
// reason codes and matched rules are Evaluate's) and says why. Every rule
// is traced, not only the index's candidates, in bundle order: matched,
// decisive (its outcome won), or the first condition that failed, in
// evaluation order: decision_types, workflow_keys, surfaces, match[i],
// then when. A `when` runs only when the structured conditions hold, with
// Evaluate's activation and cost budget; the first CEL error stops CEL as
// it stops Evaluate (later `when`s are "not evaluated"). At most
// MaxExplainedRules (1,000) traces are listed: the winning rules first,
// then the rule whose `when` failed, the other matches, the failed rules
// in bundle order; RulesOmitted counts the rest. An input Evaluate refuses
// (nil, an invalid amount or risk score) is explained by its error alone.
//
// Flips are the smallest single-field changes that change the outcome.
// Candidates come from the bundle's selectors and structured predicates
// only: for each number operand t (amount, risk_score, context.<key>) a
// value just below t (an amount by 0.000001, its finest precision, within
// 0..MaxAmount; other numbers by one float step), t itself and just
// above t, tried nearest to the current value first; string and boolean
// operands in bundle order; removing the field (absent), or supplying it
// (present) when an exists/not_exists predicate tests it. approval.verified
// flips to verified (the approval kept, Verified set), to unverified, or to
// no evidence. mode and signals.* are not searched, nor thresholds that
// only a `when` names (a `when` is still evaluated on every candidate).
// Each candidate is evaluated on a copy of the input (maps replaced, never
// modified); one that fails evaluation is no flip. At most
// MaxFlipEvaluations (2,000) candidates are evaluated, one per field in
// turn. Per field and resulting outcome the first candidate in that order
// is reported, as "lt"/"gt" t (just below/above t), "le"/"ge" t (at t, and
// beyond it as well), "eq" (that value), "absent" or "present", with a
// message such as "amount below 1000 would ALLOW" (numbers written plainly,
// without separators); flips are sorted by field, then outcome from ALLOW
// to BLOCK.
//
// Diff compares two bundles rule by rule, pairing rules by id: rules added
// (in the new order), removed (in the old order), changed (which members),
// whether the rules both keep changed their relative order (which orders
// reason codes), and changes of bundle_id, mode and default. Members are
// compared canonically: predicate values by their JSON form (5 equals
// 5.0), an absent list as an empty one, lists in order. Identical means
// every member but version and source is equal.
package policy
