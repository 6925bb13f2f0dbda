package pack

import (
	"fmt"
	"strconv"

	"github.com/clearancehq/clearance/ledger"
)

// The CSV columns of each file, in order. They are part of the pack format:
// add columns only with a new PackVersion.
var (
	decisionColumns = []string{"ledger_seq", "created_at", "dossier_id", "decision_id", "outcome", "mode",
		"workflow_key", "decision_type", "dossier_digest", "entry_hash"}
	eventColumns = []string{"seq", "recorded_at", "org_id", "kind", "subject_id", "payload_digest",
		"prev_entry_hash", "entry_hash"}
	grantColumns = []string{"grant_id", "decision_id", "dossier_id", "workflow_key", "state", "issued_at", "expires_at",
		"claimed_at", "finalized_at", "final_code", "effect_confirmed", "reconciliation", "reconciled_at"}
	workflowColumns = []string{"workflow_key", "decisions", "allow", "escalate", "review_required", "block",
		"shadow", "enforcement", "grants", "issued", "claimed", "committed", "failed", "indeterminate"}
)

func u64(n uint64) string { return strconv.FormatUint(n, 10) }
func itoa(n int) string   { return strconv.Itoa(n) }

func decisionRecord(d Decision) []string {
	return []string{u64(d.LedgerSeq), d.CreatedAt, d.DossierID, d.DecisionID, d.Outcome, d.Mode,
		d.WorkflowKey, d.DecisionType, d.DossierDigest, d.EntryHash}
}

func eventRecord(e ledger.Entry) []string {
	return []string{u64(e.Seq), e.RecordedAt, e.OrgID, e.Kind, e.SubjectID, e.PayloadDigest, e.PrevEntryHash, e.EntryHash}
}

func grantRecord(g Grant) []string {
	return []string{g.GrantID, g.DecisionID, g.DossierID, g.WorkflowKey, g.State, g.IssuedAt, g.ExpiresAt,
		g.ClaimedAt, g.FinalizedAt, g.FinalCode, strconv.FormatBool(g.EffectConfirmed), g.Reconciliation, g.ReconciledAt}
}

func workflowRecord(w Workflow) []string {
	out := []string{w.WorkflowKey, itoa(w.Decisions)}
	for _, o := range Outcomes {
		out = append(out, itoa(w.ByOutcome[o]))
	}
	out = append(out, itoa(w.Shadow), itoa(w.Enforcement), itoa(w.Grants))
	for _, s := range GrantStates {
		out = append(out, itoa(w.GrantsByState[s]))
	}
	return out
}

// parseU64 reads a decimal without sign or leading zeros.
func parseU64(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a decimal count", s)
	}
	return n, nil
}

func parseInt(s string) (int, error) {
	n, err := parseU64(s)
	if err != nil || n > 1<<40 {
		return 0, fmt.Errorf("%q is not a decimal count", s)
	}
	return int(n), nil
}

func decisionFromRecord(r []string) (Decision, error) {
	seq, err := parseU64(r[0])
	if err != nil {
		return Decision{}, err
	}
	return Decision{LedgerSeq: seq, CreatedAt: r[1], DossierID: r[2], DecisionID: r[3], Outcome: r[4], Mode: r[5],
		WorkflowKey: r[6], DecisionType: r[7], DossierDigest: r[8], EntryHash: r[9]}, nil
}

func eventFromRecord(r []string) (ledger.Entry, error) {
	seq, err := parseU64(r[0])
	if err != nil {
		return ledger.Entry{}, err
	}
	return ledger.Entry{Seq: seq, RecordedAt: r[1], OrgID: r[2], Kind: r[3], SubjectID: r[4], PayloadDigest: r[5],
		PrevEntryHash: r[6], EntryHash: r[7]}, nil
}

func grantFromRecord(r []string) (Grant, error) {
	confirmed, err := strconv.ParseBool(r[10])
	if err != nil || (r[10] != "true" && r[10] != "false") {
		return Grant{}, fmt.Errorf("effect_confirmed %q is not true or false", r[10])
	}
	return Grant{GrantID: r[0], DecisionID: r[1], DossierID: r[2], WorkflowKey: r[3], State: r[4], IssuedAt: r[5],
		ExpiresAt: r[6], ClaimedAt: r[7], FinalizedAt: r[8], FinalCode: r[9], EffectConfirmed: confirmed,
		Reconciliation: r[11], ReconciledAt: r[12]}, nil
}

func workflowFromRecord(r []string) (Workflow, error) {
	w := *newWorkflow(r[0])
	nums := make([]int, len(r)-1)
	for i, s := range r[1:] {
		n, err := parseInt(s)
		if err != nil {
			return Workflow{}, err
		}
		nums[i] = n
	}
	w.Decisions = nums[0]
	for i, o := range Outcomes {
		w.ByOutcome[o] = nums[1+i]
	}
	k := 1 + len(Outcomes)
	w.Shadow, w.Enforcement, w.Grants = nums[k], nums[k+1], nums[k+2]
	for i, s := range GrantStates {
		w.GrantsByState[s] = nums[k+3+i]
	}
	return w, nil
}
