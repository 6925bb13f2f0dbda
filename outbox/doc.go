// Package outbox holds the events Clearance owes to the outside world
// (decision.resolved and the ones after it) between the change that
// caused them and their delivery.
//
// # Contract
//
// Emit writes an event in the transaction of the change that caused it:
// it is committed with that change or not at all, so an acknowledged
// change always has its event and a refused one never does. Only an org
// with a subscriber (Subscribe) is owed events; for the others Emit writes
// nothing. A change made under a lock prepares its event first (Prepare:
// validation and encoding, no transaction needed) and emits the Prepared
// inside, where only the write is left. Events are
// jobs (package jobs) of kind JobKind, due at once: durable, listed across
// orgs by Due, and handed over once. Take, in a transaction of the
// event's org, marks a pending event handed over and reports whether it
// was still pending; a dispatcher fans the event out to its destinations
// in that same transaction, so that several servers sharing one store
// hand each event over exactly once, and a crash before the commit leaves
// it pending. Delivery itself is the consumer's (package webhook).
//
// Like every record package it holds no state of its own and no rule of
// the backends': it is free functions over the jobs.Tx and jobs.Reader a
// backend provides. Its conformance suite is outbox/outboxtest.
package outbox
