// Package decide makes decisions: Evaluate (evaluate-decision, its gate and
// hook aliases) and EnforceAndBind (a signed execution intent, bound to a
// single-use grant on ALLOW in ENFORCEMENT). Both take what the caller sent
// — the request body exactly as received, or the signed intent — decode it
// themselves, resolve the org's policy, evaluate, and record through ONE
// path: the dossier, its ledger entry, its chain member, the idempotency
// record and, for a bound intent, the grant, in one transaction of the org,
// before anything is answered. What is evaluated is what is recorded.
//
// Verdicts map an outcome to the branch a workflow tool takes (GateAnswer);
// a verification envelope is a signed summary of a recorded decision.
package decide
