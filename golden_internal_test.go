package clearance

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/golden"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
)

// The golden records: fixed ids, times and keys, every optional member set
// (an omitted member would not be pinned).
var (
	goldenAt    = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	goldenOrg   = "0190f4b2-0000-7000-8000-00000000000a"
	goldenDos   = "0190f4b2-0000-7000-8000-0000000000d1"
	goldenDec   = "0190f4b2-0000-7000-8000-0000000000d2"
	goldenEval  = "0190f4b2-0000-7000-8000-0000000000d3"
	goldenGrant = "0190f4b2-0000-7000-8000-0000000000a1"
)

func goldenDigest(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func goldenDossier() Dossier {
	return Dossier{
		DossierID: goldenDos, DecisionID: goldenDec, EvaluationID: goldenEval, OrgID: goldenOrg,
		Route:            string(RouteEnforceAndBind),
		Intent:           json.RawMessage(`{"amount":{"value":"120.00","currency":"EUR"},"action":{"type":"payment.send"}}`),
		IntentAsReceived: `{"action":{"type":"payment.send"},"amount":{"currency":"EUR","value":"120.00"}}`,
		IntentDigest:     goldenDigest('1'), IntentProfile: canon.Profile,
		Outcome: policy.OutcomeAllow, ReasonCodes: []string{"WITHIN_LIMIT"}, MatchedRules: []string{"small-payments"},
		EvaluationError: "none",
		PolicySnapshot:  policy.Snapshot{PolicyVersion: "3", BundleID: "payments", BundleDigest: goldenDigest('2'), Evaluator: "clearance-policy/1"},
		Mode:            policy.ModeEnforcement, RequestedMode: policy.ModeShadow, BundleMode: policy.ModeEnforcement,
		Actor:          DossierActor{CredentialID: "key_1", CredentialKind: "agent", ID: "agent-7", Type: "agent"},
		IdempotencyKey: "idem-1", CorrelationID: "corr-1", RequestID: "req-1",
		CreatedAt: goldenAt.Format(timeFormat), LedgerSeq: 42, GrantID: goldenGrant,
		ChainID: "chain-1", ParentDecisionID: "0190f4b2-0000-7000-8000-0000000000d0",
		PolicyPin: "2", ActivePolicyVersion: "3", EscalationID: "0190f4b2-0000-7000-8000-0000000000e1",
		Approval: &DossierApproval{Issuer: "https://approvals.example", RequestID: "req_1", ReceiptID: "rct_1",
			Receipt: "eyJhbGciOiJFZERTQSJ9.e30.c2ln", Approver: "ana@example.com", Presence: "webauthn-uv",
			DecidedAt: "2026-03-01T12:00:00Z"},
	}
}

func goldenEvidence() (*claim.Evidence, *claim.Receipt) {
	return &claim.Evidence{Kind: "payment", Status: "CONFIRMED", EffectDigest: goldenDigest('e'), Source: "effect_receipt"},
		&claim.Receipt{Profile: "VP-3", Token: "eyJhbGciOiJFZERTQSJ9.e30.c2ln", KID: "psp-1", Issuer: "https://psp.example",
			EffectDigest: goldenDigest('e'), Outcome: "COMMITTED", Verified: false, Reason: "unknown kid"}
}

// goldenRecords is every record whose canonical digest enters the ledger:
// the golden file's name, the ledger kinds whose payload digest it is, and
// the value as the engine builds it.
var goldenRecords = []struct {
	name  string
	kinds []string
	value func(t *testing.T) any
}{
	{"dossier", []string{ledger.KindDecision}, func(*testing.T) any { return goldenDossier() }},
	// A dossier with the signals its policy read (omitted when none, so
	// the one above keeps its bytes).
	{"dossier_signals", []string{ledger.KindDecision}, func(*testing.T) any {
		d := goldenDossier()
		d.Signals = []dossier.Signal{{Type: "fraud.alert", EventID: "0190f4b2-0000-7000-8000-0000000000f2",
			Timestamp: "2026-03-01T11:59:00Z", ReceivedAt: goldenAt.Format(timeFormat), DataDigest: goldenDigest('9')}}
		return d
	}},
	// A dossier with the federated decisions it was evaluated with
	// (omitted when none, so the ones above keep their bytes).
	{"dossier_federation", []string{ledger.KindDecision}, func(*testing.T) any {
		d := goldenDossier()
		d.Federation = []DossierFederated{{Envelope: "eyJhbGciOiJFZERTQSJ9.e30.c2ln", Issuer: "https://a.example", Org: "0190f4b2-0000-7000-8000-0000000000f4", KID: "k1",
			EnvelopeID: "0190f4b2-0000-7000-8000-0000000000f5", DecisionID: "0190f4b2-0000-7000-8000-0000000000f6",
			DossierID: "0190f4b2-0000-7000-8000-0000000000f7", DossierDigest: goldenDigest('a'), Outcome: "ALLOW",
			Mode: "ENFORCEMENT", IntentDigest: goldenDigest('b'), MatchesIntent: true}}
		return d
	}},
	{"grant_issued", []string{ledger.KindGrantIssued}, func(*testing.T) any {
		return grantRecordOf(claim.Grant{OrgID: goldenOrg, GrantID: goldenGrant, DecisionID: goldenDec, DossierID: goldenDos,
			DossierDigest: goldenDigest('3'), IntentID: "intent-1", IntentHash: goldenDigest('4'), PayloadDigest: goldenDigest('5'),
			Nonce: "nonce-1", Scope: "scope-1", ActorID: "agent-7", ActionType: "payment.send", IssuedAt: goldenAt,
			ExpiresAt: goldenAt.Add(2 * time.Minute), State: claim.StateIssued})
	}},
	{"reconciled", []string{ledger.KindReconciled}, func(*testing.T) any {
		ev, rc := goldenEvidence()
		return claim.Reconciliation{Resolution: claim.OutcomeCommitted, Evidence: ev, Receipt: rc, EffectConfirmed: true,
			Note: "confirmed with the provider", ReconciledAt: goldenAt}
	}},
	// A bundle's ledger payload is the digest of its canonical form, at
	// publication and at activation.
	{"policy_bundle", []string{ledger.KindPolicyPublished, ledger.KindPolicyActivated}, func(t *testing.T) any {
		c, err := policy.Compile(policy.Bundle{BundleID: "payments", Version: "3", Mode: policy.ModeEnforcement,
			Rules: []policy.Rule{{ID: "small-payments", DecisionTypes: []string{"PAYMENT"}, WorkflowKeys: []string{"PAYOUTS"},
				Surfaces: []string{"api"}, Match: []policy.Predicate{{Field: "amount", Op: "le", Value: 500.0}},
				When: "true", Outcome: policy.OutcomeAllow, ReasonCodes: []string{"WITHIN_LIMIT"}}},
			Default: policy.Default{Outcome: policy.OutcomeBlock, ReasonCodes: []string{"NO_RULE"}}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := c.Digest(), canon.Digest(c.Canonical()); got != want {
			t.Fatalf("bundle digest %s is not the digest of its canonical form (%s)", got, want)
		}
		return json.RawMessage(c.Canonical())
	}},
	{"override", []string{ledger.KindOverride}, func(*testing.T) any {
		return Override{OverrideID: "0190f4b2-0000-7000-8000-0000000000o1", OrgID: goldenOrg, DossierID: goldenDos,
			DossierDigest: goldenDigest('7'), DecisionID: goldenDec, DecisionOutcome: policy.OutcomeEscalate,
			DecisionMode: policy.ModeEnforcement, Resolution: OverrideApproved, Actor: OverrideActor{ID: "alice", Type: "human"},
			Note: "approved by phone", ReasonCode: "MANUAL_APPROVAL", CredentialID: "key_1", RequestID: "req-2",
			CreatedAt: goldenAt.Format(timeFormat), LedgerSeq: 43, Replayed: true}
	}},
	{"dispatch", []string{ledger.KindDispatched}, func(*testing.T) any {
		return Dispatch{DispatchID: "0190f4b2-0000-7000-8000-0000000000s1", OrgID: goldenOrg, GrantID: goldenGrant,
			DecisionID: goldenDec, DossierID: goldenDos, ClaimTokenDigest: goldenDigest('6'), RequestDigest: goldenDigest('8'),
			Target: "https://psp.example/payments", DispatchedAt: goldenAt.Format(timeFormat),
			RecordedAt: goldenAt.Add(time.Millisecond).Format(timeFormat), CredentialID: "key_1", RequestID: "req-3",
			LedgerSeq: 44, Replayed: true}
	}},
}

// goldenElsewhere are the ledger kinds whose records a feature package
// pins in a golden test of its own, under <package>/testdata/golden.
var goldenElsewhere = []struct{ kind, pkg, name string }{
	{ledger.KindOrgCreated, "admin", "org_created"},
	{ledger.KindAPIKeyCreated, "admin", "api_key_created"},
	{ledger.KindKeyRegistered, "admin", "key_registered"},
	{ledger.KindKeyRevoked, "admin", "key_revoked"},
	{ledger.KindClaimed, "execution", "claimed"},
	{ledger.KindFinalized, "execution", "finalized"},
	{ledger.KindShareLinksRevoked, "sharelink", "share_links_revoked"},
	{ledger.KindExportRequested, "export", "export_requested"},
	{ledger.KindExportCompleted, "export", "export_succeeded"},
	// Every escalation.* kind is a transition record.
	{ledger.KindEscalationOpened, "escalation", "escalation_transition"},
	{ledger.KindApprovalUsed, "escalation", "approval_used"},
	{ledger.KindSignalConnectorCreated, "signals", "signal_connector"},
	{ledger.KindSignalConnectorRevoked, "signals", "signal_connector"},
	{ledger.KindSignalsReceived, "signals", "signals_received"},
	{ledger.KindOnboardingBundleIssued, "onboarding", "bundle_issued"},
	{ledger.KindWorkspaceProvisioned, "onboarding", "workspace_provisioned"},
	{ledger.KindWorkspaceClaimed, "onboarding", "workspace_claimed"},
	{ledger.KindCredentialsRevoked, "admin", "credentials_revoked"},
	{ledger.KindSpendReserved, "spend", "reservation"},
	{ledger.KindSpendSettled, "spend", "reservation"},
	{ledger.KindDataProtectionSet, "privacy", "data_protection_set"},
	{ledger.KindSubjectErased, "privacy", "subject_erased"},
	{ledger.KindIssuerTrusted, "federation", "issuer_trusted"},
	{ledger.KindIssuerRemoved, "federation", "issuer_removed"},
}

// TestGoldenLedgerPayloads pins the RFC 8785 bytes of every record whose
// digest the ledger commits to: a renamed member or a changed encoding
// would change what old entries verify against, so it must be a visible
// change of testdata/golden (go test -run Golden -update), never a silent one.
// A file holds exactly the canonical bytes (no trailing newline), so its
// SHA-256 is the payload digest the ledger records.
func TestGoldenLedgerPayloads(t *testing.T) {
	for _, tc := range goldenRecords {
		t.Run(tc.name, func(t *testing.T) { golden.Check(t, tc.name, tc.value(t)) })
	}
}

// TestGoldenCoversEveryLedgerKind fails on a ledger kind without a golden
// record, so that a new kind of entry cannot escape the pinning above.
func TestGoldenCoversEveryLedgerKind(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range goldenRecords {
		for _, k := range tc.kinds {
			covered[k] = true
		}
	}
	for _, g := range goldenElsewhere {
		if _, err := os.Stat(filepath.Join(g.pkg, "testdata", "golden", g.name+".json")); err != nil {
			t.Errorf("ledger kind %q is said to be pinned in %s: %v", g.kind, g.pkg, err)
			continue
		}
		covered[g.kind] = true
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("ledger", "ledger.go"), nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !strings.HasPrefix(name.Name, "Kind") || !ok || lit.Kind != token.STRING {
					continue
				}
				kind, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				n++
				if !covered[kind] {
					t.Errorf("ledger.%s (%q) has no golden record in goldenRecords", name.Name, kind)
				}
			}
		}
	}
	if n < 15 {
		t.Fatalf("found only %d ledger kinds in ledger/ledger.go", n)
	}
}
