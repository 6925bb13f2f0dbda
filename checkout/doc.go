// Package checkout is the UCP checkout authority: it decides whether one
// UCP checkout may be completed and binds that permission to the exact
// checkout.
//
// # Contract
//
//   - Authorize takes a complete UCP checkout response envelope. Package
//     ucp validates it for its release (2026-04-08 or 2026-08-25, exactly)
//     BEFORE anything else: an invalid, ambiguous or unsupported envelope,
//     a merchant terms signature (ap2.merchant_authorization) that fails
//     against the org's registered merchant key, or a checkout mandate
//     whose shape or binding is wrong is a 400 naming the JSON pointer, and
//     nothing is evaluated or written.
//   - The policy sees the checkout in the one input shape: decision_type
//     UCP_CHECKOUT, workflow_key ucp.checkout, surface ucp, action
//     {type ucp.checkout.complete, amount (the total in major units of the
//     currency's ISO 4217 exponent), currency, target (the checkout id)},
//     flat facts in context (ucp_release, ucp_status, ucp_terms,
//     ucp_merchant_kid, ucp_mandate, ucp_line_items, ucp_total_minor), and
//     the whole summary as CEL's intent.checkout (totals, line items,
//     payment handlers, merchant terms, mandate, digest).
//   - The decision is recorded like any other (dossier with the checkout
//     as its intent and its verification, ledger entry, chain, capsule).
//     Only ALLOW in ENFORCEMENT is authoritative: it carries an
//     exact-action grant whose intent_hash is the checkout's digest
//     (sha256 of its RFC 8785 form), claimed through claim-token right
//     before the merchant commits and finalized through finalize-token.
//     A claim evaluates the checkout again under the policy then active,
//     with its terms verified against the merchant keys as they are then.
//     SHADOW answers are never authoritative. BLOCK, REVIEW_REQUIRED and
//     ESCALATE are refusals (Refused, 403) carrying the same answer.
//   - A checkout retains its authority while its grant can still be used
//     or its effect is not known to have failed: ISSUED and unexpired,
//     CLAIMED, COMMITTED or INDETERMINATE. While it does, the same
//     checkout again is answered with the retained authority (Replayed),
//     and a different checkout under the same id is 409
//     UCP_AUTHORITY_CONFLICT. A grant that expired unclaimed or was
//     finalized FAILED releases the checkout. An Idempotency-Key replays
//     the answer recorded under it; another checkout under it is 409.
//   - A store that cannot answer is a 503; nothing here authorizes on an
//     error.
package checkout
