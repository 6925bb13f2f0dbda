// Package analytics is the platform operator's view across orgs: consent
// to growth reports, growth classification, the growth scorecard, its
// baselines, and signed monthly aggregates (blast-radius reports). Every
// entry point is the platform's: the server answers an org key with 403.
//
// # Contract
//
//   - Consent (SetConsent) is recorded only when the operator says so,
//     never inferred from usage. Each change is kept in the org's consent
//     history; a revocation affects reports frozen after it, never one
//     frozen before.
//   - Classification (Classify) is environment (prod, staging, dev),
//     audience (external, internal, sandbox, demo), surface and optional
//     source_utm. The first classification freezes surface and source_utm
//     (the first-touch attribution); later ones change environment and
//     audience only. It is analytics only: no policy reads it.
//   - Durable decisions are counted by rollups that follow each org's
//     ledger: a decision counts once its ledger entry is committed, and
//     every decision is counted once (the rollup keeps the ledger seq it
//     has reached, and moves it in the same transaction as its counts).
//     Run catches up the rollups of the reviewed orgs an engine writes. A
//     report also counts, without writing, what each org it covers holds
//     past its rollup, so it never misses a decision committed before it
//     began; a freeze stores those counts with its artifact. Reads (the
//     scorecard, a refused freeze) write nothing.
//   - The scorecard counts reviewed orgs only: classified prod/external.
//     Unclassified orgs are excluded and reported separately; cohorts are
//     UTC months of org creation; a rate with no orgs under it is null.
//   - A baseline is an immutable snapshot of the scorecard under a name;
//     the same name again is 409 BASELINE_EXISTS.
//   - A blast-radius report covers one completed UTC month and consented
//     external production orgs only. Each mode × outcome cell is published
//     only when at least MinOrgsPerCell distinct orgs contribute; smaller
//     cells are suppressed and no total across cells is ever published, so
//     no suppressed cell can be recovered by subtraction. A month in which
//     fewer than MinOrgsPerCell eligible orgs decided is not published
//     (409 INSUFFICIENT_COHORT). The report is RFC 8785 JSON signed with
//     the reporting key (compact JWS, typ
//     grant.TypGrowthReport, aud grant.AudGrowthReport); without a reporting
//     key a new report is 503. A month is frozen exactly once, whichever
//     server asks first; every later request gets that artifact unchanged.
//     Freezing prepares evidence for editorial review: nothing is published
//     or mailed.
//   - A store that cannot answer is a 503 and nothing is written.
package analytics
