// Package pack builds and verifies validation packs: an org's audit export
// of decisions in a time window, optionally with its whole event log (the
// ledger), the lifecycle of the grants those decisions issued and the
// coverage per workflow, anchored in a ledger checkpoint so that a pack
// proves its own completeness.
//
// # Layout (PackVersion clearance.validation-pack/1)
//
// A pack is one file. FormatJSON is a JSON document with one member per data
// file, each a JSON array of row objects, and a last member "manifest":
//
//	{"events": [...], "decisions": [...], "grants": [...], "workflows": [...],
//	 "manifest": {...}}
//
// FormatCSV is a zip of events.csv, decisions.csv, grants.csv,
// workflows.csv and manifest.json; FormatPDF is the same zip with
// report.pdf added before the manifest (a summary page and the first
// MaxReportRows decisions; the machine-readable files stay authoritative).
// Without include_events a pack holds only the decisions (and the report).
// CSV files start with a header row of fixed columns; values are written
// verbatim (no spreadsheet-formula escaping, so that they are the recorded
// values). Times are RFC 3339 in UTC.
//
// The manifest names the pack (org, export id, format, window, generated
// time), counts its rows, lists every data file with the SHA-256 of its
// exact bytes (the JSON member's value, or the zip entry uncompressed), and
// carries the ledger anchor: the size and RFC 9162 root of the org's ledger
// when the pack was built, the entry hash of its head and, when a ledger
// key is configured, the C2SP signed checkpoint of that tree.
// manifest_sha256 is the SHA-256 of the manifest's exact bytes.
//
// # Guarantees of a built pack
//
//   - events are the org's ledger entries 1..size, one hash-linked chain
//     whose RFC 9162 root is the anchored root (the checkpoint's, when signed);
//   - decisions are in ascending ledger seq, each the decision entry at its
//     seq (dossier id, dossier digest, entry hash and time), and every
//     decision entry up to size whose time lies in the window has a row;
//   - grants belong to the pack's decisions and workflows are exactly what
//     the decisions and grants add up to.
//
// Verify checks all of these from the pack alone (the decision and grant
// checks need include_events), plus whatever the caller recorded:
// bundle_sha256 (SHA-256 of the downloaded bytes), manifest_sha256,
// bundle_signature_hmac_sha256 (HMAC-SHA256 of the bytes under the org's
// export key, OrgKey) and the ledger verifier key for the checkpoint's
// signature. It reports every problem with a stable reason (Reason*), not a
// bare bool.
//
// The package is pure: the Builder writes to an io.Writer and never reads a
// clock or a store; callers feed it in order and keep the bytes.
package pack
