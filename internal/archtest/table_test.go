package archtest

// The layers of DESIGN §2, lowest first. A package may import a package of
// another layer only when mayImport says so; within its own layer only the
// packages its entry names in peers.
const (
	leaf     = "leaf"     // internal/ leaves: canon, strictjson, coded, outbound, privatefile
	pure     = "pure"     // formats and rules: no storage, net/http, clock or randomness
	records  = "records"  // rules over a Tx the consumer declares
	storage  = "storage"  // the store contract
	backend  = "backend"  // store implementations: chosen by cmd and examples only
	kernel   = "kernel"   // internal/core
	features = "features" // one package per feature
	facade   = "facade"   // the root package
	wire     = "wire"     // server
	cmdlib   = "cmdlib"   // cmd/clearance/internal: the command's own helpers
	remote   = "remote"   // client: the Go HTTP client, which knows the server only by its API
	cmd      = "cmd"      // the binary
	example  = "example"  // runnable programs on the public API
	suite    = "suite"    // test support: conformance suites, test plumbing, test-only packages
)

var mayImport = map[string][]string{
	leaf:     {},
	pure:     {leaf},
	records:  {leaf, pure},
	storage:  {leaf, pure, records},
	backend:  {leaf, pure, records, storage},
	kernel:   {leaf, pure, records, storage},
	features: {leaf, pure, records, storage, kernel},
	facade:   {leaf, pure, records, storage, kernel, features},
	wire:     {leaf, pure, records, storage, kernel, features, facade},
	cmdlib:   {leaf, pure},
	remote:   {leaf, pure},
	cmd:      {leaf, pure, records, storage, backend, kernel, features, facade, wire, cmdlib, remote},
	example:  {pure, records, storage, backend, facade, wire, remote},
	suite:    {leaf, pure, records, storage},
}

// rule places one package. Packages of the leaf and pure layers are pure;
// pure marks a package of another layer that keeps the same discipline, and
// io a leaf that does not: it talks to the network, so no pure package may
// import it.
type rule struct {
	layer string
	pure  bool
	io    bool
	peers []string // same-layer packages it may import
	deny  []string // packages its layer would allow but it may not import
}

// packages is the allow-list: every package directory of the module, and
// nothing else. A new folder must be placed here on purpose.
var packages = map[string]rule{
	"internal/canon":      {layer: leaf},
	"internal/strictjson": {layer: leaf},
	"internal/coded":      {layer: leaf},
	"internal/jsonw":      {layer: leaf},
	// The one outbound HTTP client (DESIGN §10): standard library only.
	"internal/outbound": {layer: leaf, io: true},
	// Secrets sealed at rest (AES-256-GCM): standard library only.
	"internal/secretbox": {layer: leaf, io: true},
	// Owner-only files written whole (keys, secrets, state): standard library only.
	"internal/privatefile": {layer: leaf, io: true},
	"internal/mail":        {layer: leaf, io: true, peers: []string{"internal/privatefile"}}, // sign-up and sign-in codes: an .eml mailbox or SMTP; files written as private files

	"policy":            {layer: pure},
	"policy/policyfile": {layer: pure, peers: []string{"policy"}},
	"grant":             {layer: pure},
	"ledger":            {layer: pure},
	"capsule":           {layer: pure, peers: []string{"grant"}},
	"proof":             {layer: pure, peers: []string{"ledger"}},
	"pack":              {layer: pure, peers: []string{"ledger"}}, // the validation-pack format
	"ucp":               {layer: pure},                            // UCP checkout envelopes, one validator per release
	// The Go HTTP client signs intents (grant) and talks to the network.
	"client": {layer: remote},

	// reader verifies what an auditor posts with the verifiers above.
	"reader": {layer: pure, peers: []string{"proof", "capsule", "pack", "ledger"}},
	// console is the operator console's static page, script and style
	// (go:embed): standard library only.
	"console": {layer: pure},

	// Records keep the pure discipline; their state is the consumer's Tx.
	"tenant": {layer: records, pure: true, deny: []string{"policy", "grant", "ledger"}},
	// Record writes the dossier, its ledger entry and its chain member.
	"dossier":  {layer: records, pure: true, peers: []string{"artifact"}},
	"artifact": {layer: records, pure: true},
	"claim":    {layer: records, pure: true},
	"registry": {layer: records, pure: true},
	"jobs":     {layer: records, pure: true}, // leases judged by the store's clock (Tx.Now)
	// Events committed with the change that caused them, waiting as jobs.
	"outbox": {layer: records, pure: true, peers: []string{"jobs"}},

	"idempotency": {layer: records, pure: true},

	"store":             {layer: storage},
	"store/pebblestore": {layer: backend},
	"store/pgstore":     {layer: backend},

	"internal/core": {layer: kernel},

	"admin":  {layer: features},
	"decide": {layer: features},
	// policies replays recorded decisions: their inputs are rebuilt by
	// decide's route decoders.
	"policies":  {layer: features, peers: []string{"decide"}},
	"evidence":  {layer: features},
	"sharelink": {layer: features, peers: []string{"policies", "audit"}}, // public reproductions through policies; audit's ENTRY_NOT_YET_SEALED
	// execution checks the grants decide issues: the intent format and the
	// grant claims are decide's.
	"execution": {layer: features, peers: []string{"decide"}},
	"audit":     {layer: features},
	// approval is Clearance's side of the approval-service protocol, over
	// internal/outbound.
	"approval": {layer: features},
	// escalation concludes managed escalations through decide (the fresh
	// evaluation and its grant) and reaches approval services by approval.
	"escalation": {layer: features, peers: []string{"decide", "approval"}},

	// webhook delivers the outbox's events over internal/outbound.
	"webhook": {layer: features},
	// signals stores inbound signals; decide and execution read them
	// through an interface of their own (decide.Signals).
	"signals": {layer: features},
	// spend keeps spend-gate budgets; decide and execution use it through
	// interfaces of their own (decide.Spend, execution.Spend).
	"spend": {layer: features},

	// onboarding creates orgs and their credentials through admin and the
	// deployment bundle's connector through signals; it installs the starter
	// policy for the automation connector through policies.
	"onboarding": {layer: features, peers: []string{"admin", "signals", "policies"}},
	"connector":  {layer: features, peers: []string{"onboarding", "admin", "policies", "webhook"}}, // the automation connector: OAuth over account sessions, callbacks through webhook

	// checkout validates UCP checkouts (package ucp) and binds them through
	// decide, like a signed intent.
	"checkout": {layer: features, peers: []string{"decide"}},
	// analytics counts decisions from the ledgers and dossiers into
	// rollups of the platform's and signs monthly reports.
	"analytics": {layer: features},
	// policysource pulls bundles from Git repositories (go-git, over
	// internal/outbound) and publishes them through policies.
	"policysource": {layer: features, peers: []string{"policies"}},
	// federation signs envelopes of recorded decisions, keeps the orgs'
	// trust lists and verifies envelopes (JWKS over internal/outbound).
	"federation": {layer: features},
	// export anchors packs in checkpoints the audit feature signs.
	"export": {layer: features, peers: []string{"audit"}},
	// privacy seals dossiers' personal data under per-subject keys (decide
	// calls it through decide.Personal) and erases data subjects.
	"privacy": {layer: features},
	// The reference approval service: a service of its own, shipped beside
	// Clearance as cmd/clearance-approver, that signs receipts with grant
	// and decodes bodies with internal/strictjson. The features layer allows
	// that (it uses no store and no kernel); it is not part of the engine,
	// so no feature names it as a peer.
	"approver": {layer: features},

	// Still the feature monolith: the facade it is to become is its layer.
	"": {layer: facade},

	"server": {layer: wire},

	"cmd/clearance/internal/keyfile": {layer: cmdlib},
	"cmd/clearance/internal/load":    {layer: cmdlib},
	"cmd/clearance":                  {layer: cmd},
	"cmd/clearance-approver":         {layer: cmd}, // the reference approval service

	"examples/embed":             {layer: example},
	"examples/verifyattestation": {layer: example},

	"ledger/ledgertest":           {layer: suite},
	"claim/claimtest":             {layer: suite},
	"dossier/dossiertest":         {layer: suite},
	"artifact/artifacttest":       {layer: suite},
	"idempotency/idempotencytest": {layer: suite},
	"jobs/jobstest":               {layer: suite},
	"outbox/outboxtest":           {layer: suite},
	"approval/approvaltest":       {layer: suite}, // an in-memory approval service
	"store/storetest": {layer: suite, // All composes every record suite
		peers: []string{"ledger/ledgertest", "claim/claimtest", "dossier/dossiertest", "artifact/artifacttest",
			"idempotency/idempotencytest", "jobs/jobstest", "outbox/outboxtest"}},
	"store/pgstore/pgtest": {layer: suite},
	"internal/archtest":    {layer: suite},
	"internal/browsertest": {layer: suite}, // headless Chromium with a virtual WebAuthn authenticator
	"internal/apidoc":      {layer: suite},
	"internal/lincheck":    {layer: suite},
	"internal/faultproxy":  {layer: suite}, // a TCP proxy that breaks connections for fault tests
	"internal/gosource":    {layer: suite},
	"internal/golden":      {layer: suite}, // pins the bytes of ledgered records // lists a module's Go files for the guard tests

	// Fault tests: the book of what a server acknowledged and its checks,
	// and a disk that fills up and fails under a pebblestore.
	"internal/acktest":          {layer: suite},
	"store/pebblestore/faultfs": {layer: suite},
}

// forbiddenInPure are imports no pure package may have, each with the
// packages below it.
var forbiddenInPure = []string{"net/http", "database/sql", "os", "log", "crypto/rand", "math/rand",
	"syscall", "io/ioutil", "github.com/cockroachdb/pebble", "github.com/jackc/pgx"}

// clockCalls are the time functions that read or wait on the clock: in a
// pure package time is an input.
var clockCalls = []string{"Now", "Since", "Until", "After", "Tick", "NewTicker", "NewTimer", "AfterFunc", "Sleep"}
