// Package export is the validation-pack feature: an org asks for an audit
// export of its decisions in a time window (Create), follows it (Get, List)
// and downloads it once built (Open); a worker (Run, or Process once) builds
// it in the background in the format of package pack.
//
// Its contract:
//   - Queuing writes the record (PENDING), its job (package jobs) and its
//     ledger entry (export.requested) in one transaction; an
//     Idempotency-Key replays the same request (package idempotency).
//   - A build is leased by the store's clock and fenced on its claim: a
//     worker that lost its lease cannot overwrite the one that took over;
//     a stopping worker hands its build back (PENDING). The end of a build
//     is ledgered (export.completed) with the pack's hashes.
//   - The pack is anchored in a checkpoint the worker seals (through
//     Config.Ledger) over every durable entry, or in the unsigned head when
//     no ledger key is configured; reads never write.
//   - A download streams the stored chunks and is cut short, never
//     delivered whole, when they are not the bytes the record hashes.
package export
