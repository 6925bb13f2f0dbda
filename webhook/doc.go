// Package webhook is the outbound half of Clearance's events: an org's
// WEBHOOK integration (endpoint, subscriptions with filters, signing
// secrets sealed at rest), the dispatcher that hands each committed event
// of the outbox to the destinations it matches, and the delivery worker.
//
// # Contract
//
// Every decision.resolved event an org's decisions commit is delivered to
// its integration when an enabled subscription's filter matches:
//
//   - at least once: an event is handed over in one transaction with its
//     delivery's queueing (outbox.Take), a delivery is a job leased by the
//     store's clock, and a worker that dies mid-attempt loses its lease to
//     the next, which attempts again; several servers on one database
//     attempt each delivery one at a time, and a delivered one never again
//     unless an operator redelivers it;
//   - with the same X-Clearance-Delivery-Id on every attempt (receivers
//     dedupe on it), X-Clearance-Event, and X-Clearance-Signature
//     (Sign; receivers check it with Verify);
//   - 2xx is delivered; anything else, 3xx included (redirects are never
//     followed), a timeout or a refused destination is a failed attempt,
//     retried after WorkerOptions.Retries (jittered) and dead-lettered
//     after the last;
//   - through the outbound client only: https (http only when private
//     destinations are allowed), no redirects, and the SSRF guard both
//     when the endpoint is registered and when each attempt dials.
//
// Every attempt is recorded in the delivery log (Deliveries), in the
// transaction that moves the delivery on.
package webhook
