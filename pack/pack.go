package pack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/ledger"
)

// PackVersion names the layout this package writes and verifies; it is the
// manifest's pack_version.
const PackVersion = "clearance.validation-pack/1"

// Format is a pack's download format; the values are the wire strings.
type Format string

// Formats.
const (
	// FormatJSON is one JSON document: a member per file, then "manifest".
	FormatJSON Format = "json"
	// FormatCSV is a zip of CSV files and manifest.json.
	FormatCSV Format = "csv"
	// FormatPDF is the CSV zip plus report.pdf, a human-readable report.
	FormatPDF Format = "pdf"
)

// ParseFormat returns the Format named s, or an error.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatJSON, FormatCSV, FormatPDF:
		return f, nil
	}
	return "", fmt.Errorf("export: format %q is not json, csv or pdf", s)
}

// MediaType is the Content-Type of a pack's download.
func (f Format) MediaType() string {
	if f == FormatJSON {
		return "application/json"
	}
	return "application/zip"
}

// Extension is the file name extension of a pack's download.
func (f Format) Extension() string {
	if f == FormatJSON {
		return "json"
	}
	return "zip"
}

// TimeFormat is how packs write timestamps: RFC 3339, UTC, nanoseconds.
const TimeFormat = time.RFC3339Nano

// Window is the half-open interval [From, To) of decision times a pack
// covers.
type Window struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Contains reports whether t lies in the window.
func (w Window) Contains(t time.Time) bool { return !t.Before(w.From) && t.Before(w.To) }

// Decision is one decision of a pack: the indexed fields of its dossier and
// the ledger entry that recorded it (entry seq LedgerSeq, kind
// decision.recorded, subject DossierID, payload digest DossierDigest).
type Decision struct {
	LedgerSeq     uint64 `json:"ledger_seq"`
	CreatedAt     string `json:"created_at"` // the entry's recorded_at
	DossierID     string `json:"dossier_id"`
	DecisionID    string `json:"decision_id"`
	Outcome       string `json:"outcome"`
	Mode          string `json:"mode"`
	WorkflowKey   string `json:"workflow_key"`
	DecisionType  string `json:"decision_type"`
	DossierDigest string `json:"dossier_digest"`
	EntryHash     string `json:"entry_hash"`
}

// Grant is the lifecycle of one execution grant issued by a decision of the
// pack, as it stood when the pack was built. Times are "" when the step did
// not happen.
type Grant struct {
	GrantID         string `json:"grant_id"`
	DecisionID      string `json:"decision_id"`
	DossierID       string `json:"dossier_id"`
	WorkflowKey     string `json:"workflow_key"` // the decision's
	State           string `json:"state"`
	IssuedAt        string `json:"issued_at"`
	ExpiresAt       string `json:"expires_at"`
	ClaimedAt       string `json:"claimed_at"`
	FinalizedAt     string `json:"finalized_at"`
	FinalCode       string `json:"final_code"`
	EffectConfirmed bool   `json:"effect_confirmed"`
	Reconciliation  string `json:"reconciliation"` // the resolution, when reconciled
	ReconciledAt    string `json:"reconciled_at"`
}

// Outcomes and grant states, in the order packs list them.
var (
	Outcomes    = []string{"ALLOW", "ESCALATE", "REVIEW_REQUIRED", "BLOCK"}
	GrantStates = []string{"ISSUED", "CLAIMED", "COMMITTED", "FAILED", "INDETERMINATE"}
)

// Workflow is the coverage of one workflow key: its decisions by outcome and
// mode, and its grants by state. Packs derive it from their decisions and
// grants, and Verify derives it again.
type Workflow struct {
	WorkflowKey   string         `json:"workflow_key"`
	Decisions     int            `json:"decisions"`
	ByOutcome     map[string]int `json:"by_outcome"`
	Shadow        int            `json:"shadow"`
	Enforcement   int            `json:"enforcement"`
	Grants        int            `json:"grants"`
	GrantsByState map[string]int `json:"grants_by_state"`
}

func newWorkflow(key string) *Workflow {
	w := &Workflow{WorkflowKey: key, ByOutcome: map[string]int{}, GrantsByState: map[string]int{}}
	for _, o := range Outcomes {
		w.ByOutcome[o] = 0
	}
	for _, s := range GrantStates {
		w.GrantsByState[s] = 0
	}
	return w
}

// Ledger anchors a pack in its org's ledger: the tree of the first Size
// entries, whose RFC 9162 root is RootHash. When Signed, Checkpoint is the
// C2SP signed note of that tree by the ledger key (VerifierKey names it);
// otherwise no ledger key was configured and the root is only what the
// pack's builder computed.
type Ledger struct {
	Origin        string `json:"origin"`
	Size          uint64 `json:"size"`
	RootHash      string `json:"root_hash"` // standard base64, as in the checkpoint text
	HeadEntryHash string `json:"head_entry_hash"`
	Signed        bool   `json:"signed"`
	Checkpoint    string `json:"checkpoint,omitempty"`
	VerifierKey   string `json:"verifier_key,omitempty"`
	// UnsignedReason says why Signed is false.
	UnsignedReason string `json:"unsigned_reason,omitempty"`
}

// File is one file of a pack as its manifest lists it. Name is the zip
// entry name, or the member name of the JSON document; SHA256 covers its
// exact bytes (uncompressed).
type File struct {
	Name      string `json:"name"`
	MediaType string `json:"media_type"`
	SHA256    string `json:"sha256"`
	Bytes     int64  `json:"bytes"`
	Rows      int    `json:"rows"` // data rows (0 for report.pdf)
}

// Counts sums up a pack.
type Counts struct {
	Decisions int            `json:"decisions"`
	ByOutcome map[string]int `json:"by_outcome"`
	Events    int            `json:"events"`
	Grants    int            `json:"grants"`
	Workflows int            `json:"workflows"`
}

// Manifest describes a pack: what it covers, its files and their hashes, and
// the ledger checkpoint that makes it checkable for completeness.
type Manifest struct {
	PackVersion   string `json:"pack_version"`
	OrgID         string `json:"org_id"`
	ExportID      string `json:"export_id"`
	Format        Format `json:"format"`
	Window        Window `json:"window"`
	IncludeEvents bool   `json:"include_events"`
	GeneratedAt   string `json:"generated_at"`
	Counts        Counts `json:"counts"`
	Files         []File `json:"files"`
	Ledger        Ledger `json:"ledger"`
}

// File names (zip formats) and member names (JSON format).
const (
	nameManifest  = "manifest"
	nameEvents    = "events"
	nameDecisions = "decisions"
	nameGrants    = "grants"
	nameWorkflows = "workflows"
	nameReport    = "report.pdf"
)

// Digest returns the "sha256:<hex>" digest of b, the notation of every hash
// in a pack and of manifest_sha256 and bundle_sha256.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// keyLabel separates the export keys from anything else derived from the
// same secret.
const keyLabel = "clearance/validation-pack/hmac-sha256/v1/"

// OrgKey derives an org's export key from the service's export secret:
// HMAC-SHA256(secret, keyLabel + orgID). Each org's packs are signed with
// its own key, so one org's key never vouches for another's pack.
func OrgKey(secret []byte, orgID string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(keyLabel + orgID))
	return m.Sum(nil)
}

// Sign returns bundle_signature_hmac_sha256: the lowercase hex of
// HMAC-SHA256(key, bundle), key being the org's export key.
func Sign(key, bundle []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(bundle)
	return hex.EncodeToString(m.Sum(nil))
}

// Errors of building.
var (
	// ErrOrder: the builder was fed out of order (entries, then decisions,
	// then grants), or after Close.
	ErrOrder = errors.New("export: builder used out of order")
	// ErrLedger: the entries fed do not form the org's chain, or do not
	// hash to the anchor's checkpoint.
	ErrLedger = errors.New("export: ledger does not match its checkpoint")
	// ErrInput: a decision or grant that the pack cannot hold (a decision
	// beyond the checkpoint, out of seq order, outside the window).
	ErrInput = errors.New("export: invalid pack content")
)

// checkEntry reports why e cannot follow prev (the zero Entry before seq 1)
// in orgID's chain, or "".
func checkEntry(prev, e ledger.Entry, orgID string) string {
	want := ledger.Genesis
	if prev.Seq > 0 {
		want = prev.EntryHash
	}
	switch {
	case e.Seq != prev.Seq+1:
		return fmt.Sprintf("seq %d follows seq %d", e.Seq, prev.Seq)
	case e.OrgID != orgID:
		return fmt.Sprintf("entry %d belongs to org %q", e.Seq, e.OrgID)
	case e.PrevEntryHash != want:
		return fmt.Sprintf("entry %d does not link to entry %d", e.Seq, prev.Seq)
	}
	h, err := e.ComputeHash()
	if err != nil || h != e.EntryHash {
		return fmt.Sprintf("entry %d does not hash to its entry_hash", e.Seq)
	}
	return ""
}
