package pack

import (
	"archive/zip"
	"bytes"
	"crypto/hmac"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/clearancehq/clearance/ledger"
)

// Reasons Verify reports, stable strings.
const (
	ReasonBundleHash         = "BUNDLE_SHA256_MISMATCH"   // the bytes are not the recorded bundle_sha256
	ReasonSignature          = "SIGNATURE_MISMATCH"       // HMAC-SHA256 under the org's export key differs
	ReasonContainer          = "CONTAINER_INVALID"        // not a pack's JSON document or zip
	ReasonManifestMissing    = "MANIFEST_MISSING"         // no manifest member or manifest.json
	ReasonManifestHash       = "MANIFEST_SHA256_MISMATCH" // the manifest is not the recorded manifest_sha256
	ReasonManifestInvalid    = "MANIFEST_INVALID"         // unreadable, or not this pack version's shape
	ReasonFileMissing        = "FILE_MISSING"             // a file the manifest lists is absent
	ReasonFileUnexpected     = "FILE_UNEXPECTED"          // a file the manifest does not list
	ReasonFileHash           = "FILE_SHA256_MISMATCH"     // a file's bytes differ from its manifest hash or size
	ReasonFileInvalid        = "FILE_INVALID"             // a file's rows do not parse
	ReasonCount              = "COUNT_MISMATCH"           // rows differ from the manifest's counts
	ReasonChainBroken        = "LEDGER_CHAIN_BROKEN"      // events are not one hash-linked chain from seq 1
	ReasonLedgerIncomplete   = "LEDGER_INCOMPLETE"        // events do not reach the checkpoint's size
	ReasonRootMismatch       = "LEDGER_ROOT_MISMATCH"     // events do not hash to the anchored root
	ReasonCheckpointInvalid  = "CHECKPOINT_INVALID"       // not signed by the ledger key, or another log's
	ReasonCheckpointMismatch = "CHECKPOINT_MISMATCH"      // the signed checkpoint names another size or root
	ReasonDecisionInvalid    = "DECISION_INVALID"         // seq out of order or beyond the checkpoint
	ReasonDecisionWindow     = "DECISION_OUTSIDE_WINDOW"  // a decision's time is outside the window
	ReasonDecisionLedger     = "DECISION_NOT_IN_LEDGER"   // a row differs from the ledger entry at its seq
	ReasonDecisionMissing    = "DECISION_MISSING"         // a decision the ledger recorded in the window has no row
	ReasonGrantDecision      = "GRANT_UNKNOWN_DECISION"   // a grant of no decision of the pack
	ReasonWorkflows          = "WORKFLOWS_MISMATCH"       // workflow coverage differs from the decisions and grants
	ReasonPDF                = "PDF_INVALID"              // report.pdf is not a PDF with pages
)

// ErrInvalidPack is wrapped by the *VerifyError Verify returns for a pack
// that does not verify.
var ErrInvalidPack = errors.New("export: pack does not verify")

// VerifyOptions are what an auditor checks a pack against. Every member is
// optional; what is not given is reported in Report.Skipped.
type VerifyOptions struct {
	// ManifestSHA256 and BundleSHA256 are the export record's
	// manifest_sha256 and bundle_sha256.
	ManifestSHA256 string
	BundleSHA256   string
	// Key is the org's export key (OrgKey) and Signature the record's
	// bundle_signature_hmac_sha256; give both or neither.
	Key       []byte
	Signature string
	// LedgerVerifierKey is the ledger key's C2SP note verifier key, as the
	// service publishes it; with it the manifest's checkpoint signature is
	// checked.
	LedgerVerifierKey string
}

// Problem is one reason a pack does not verify.
type Problem struct {
	Reason string `json:"reason"`
	File   string `json:"file,omitempty"`
	Detail string `json:"detail"`
}

// Report is what Verify found. Valid is true when Problems is empty.
type Report struct {
	Valid          bool      `json:"valid"`
	Format         Format    `json:"format,omitempty"`
	ManifestSHA256 string    `json:"manifest_sha256,omitempty"`
	BundleSHA256   string    `json:"bundle_sha256"`
	Manifest       *Manifest `json:"manifest,omitempty"`
	Problems       []Problem `json:"problems"`
	// Checked and Skipped name the checks done, and those not done with why.
	Checked []string `json:"checked"`
	Skipped []string `json:"skipped"`
}

// VerifyError is the error of a pack that does not verify: its problems,
// the first one the most fundamental.
type VerifyError struct{ Problems []Problem }

func (e *VerifyError) Error() string {
	p := e.Problems[0]
	s := "export: pack does not verify: " + p.Reason
	if p.File != "" {
		s += " (" + p.File + ")"
	}
	s += ": " + p.Detail
	if n := len(e.Problems) - 1; n > 0 {
		s += fmt.Sprintf(" (and %d more)", n)
	}
	return s
}

// Unwrap returns ErrInvalidPack.
func (e *VerifyError) Unwrap() error { return ErrInvalidPack }

// Reason is the first problem's reason.
func (e *VerifyError) Reason() string { return e.Problems[0].Reason }

// maxProblems bounds a report.
const maxProblems = 100

// maxUnpacked bounds the uncompressed bytes Verify reads from a zip.
const maxUnpacked = 4 << 30

// Verify checks a downloaded pack: its bytes against the recorded
// bundle_sha256 and HMAC, its manifest against manifest_sha256, every file
// against the manifest, the rows against each other and the counts, and the
// pack against its ledger anchor: with events, that they are the chain of
// entries 1..size hashing to the anchored root, that every decision row is
// the decision entry at its seq and that every decision entry in the window
// has a row; and the checkpoint's signature when the ledger verifier key is
// given. It returns every problem found (a *VerifyError wrapping
// ErrInvalidPack) rather than only the first, so a reader sees what was
// changed. Misuse (a key without a signature) is a plain error.
func Verify(bundle []byte, opts VerifyOptions) (Report, error) {
	if (len(opts.Key) == 0) != (opts.Signature == "") {
		return Report{}, errors.New("export: VerifyOptions needs both Key and Signature, or neither")
	}
	v := &verifier{opts: opts, rep: Report{BundleSHA256: Digest(bundle), Problems: []Problem{}, Checked: []string{}, Skipped: []string{}}}
	v.run(bundle)
	v.rep.Valid = len(v.rep.Problems) == 0
	if !v.rep.Valid {
		return v.rep, &VerifyError{Problems: v.rep.Problems}
	}
	return v.rep, nil
}

type verifier struct {
	opts  VerifyOptions
	rep   Report
	files map[string][]byte // container files by name, manifest excluded
	order []string          // their names in container order
	m     Manifest
}

func (v *verifier) problem(reason, file, format string, args ...any) {
	if len(v.rep.Problems) < maxProblems {
		v.rep.Problems = append(v.rep.Problems, Problem{Reason: reason, File: file, Detail: fmt.Sprintf(format, args...)})
	}
}

func (v *verifier) checked(s string) { v.rep.Checked = append(v.rep.Checked, s) }
func (v *verifier) skipped(s string) { v.rep.Skipped = append(v.rep.Skipped, s) }

func (v *verifier) run(bundle []byte) {
	if want := v.opts.BundleSHA256; want != "" {
		v.checked("bundle_sha256")
		if v.rep.BundleSHA256 != want {
			v.problem(ReasonBundleHash, "", "the bundle is %s, the export recorded %s", v.rep.BundleSHA256, want)
		}
	} else {
		v.skipped("bundle_sha256: no recorded hash given")
	}
	if len(v.opts.Key) > 0 {
		v.checked("bundle_signature_hmac_sha256")
		got, _ := hex.DecodeString(Sign(v.opts.Key, bundle))
		want, err := hex.DecodeString(v.opts.Signature)
		if err != nil || !hmac.Equal(got, want) {
			v.problem(ReasonSignature, "", "HMAC-SHA256 of the bundle under the org's export key is not the recorded signature")
		}
	} else {
		v.skipped("bundle_signature_hmac_sha256: no export key given")
	}

	manifest, container := v.open(bundle)
	if manifest == nil {
		return
	}
	v.rep.ManifestSHA256 = Digest(manifest)
	if want := v.opts.ManifestSHA256; want != "" {
		v.checked("manifest_sha256")
		if v.rep.ManifestSHA256 != want {
			v.problem(ReasonManifestHash, "", "the manifest is %s, the export recorded %s", v.rep.ManifestSHA256, want)
		}
	} else {
		v.skipped("manifest_sha256: no recorded hash given")
	}
	if err := json.Unmarshal(manifest, &v.m, json.RejectUnknownMembers(true)); err != nil {
		v.problem(ReasonManifestInvalid, "", "the manifest does not decode: %v", err)
		return
	}
	if !v.checkManifest(container) {
		return
	}
	m := &v.m
	v.rep.Format, v.rep.Manifest = m.Format, m
	v.checkFiles()

	var (
		decisions []Decision
		events    []ledger.Entry
		grants    []Grant
		workflows []Workflow
	)
	decisions = readRows(v, nameDecisions, decisionColumns, decisionFromRecord)
	if m.IncludeEvents {
		events = readRows(v, nameEvents, eventColumns, eventFromRecord)
		grants = readRows(v, nameGrants, grantColumns, grantFromRecord)
		workflows = readRows(v, nameWorkflows, workflowColumns, workflowFromRecord)
	}
	v.checkCounts(decisions, events, grants, workflows)
	v.checkLedger(events)
	v.checkDecisions(decisions, events)
	if m.IncludeEvents {
		v.checkGrants(decisions, grants, workflows)
	}
	if m.Format == FormatPDF {
		v.checked("report.pdf structure")
		if data, ok := v.files[nameReport]; ok {
			if _, err := CheckPDF(data); err != nil {
				v.problem(ReasonPDF, nameReport, "%v", err)
			}
		}
	}
}

// open reads the container: the manifest's bytes and the other files.
func (v *verifier) open(bundle []byte) (manifest []byte, container Format) {
	v.files = map[string][]byte{}
	add := func(name string, data []byte) bool {
		if _, dup := v.files[name]; dup || (name == nameManifest && manifest != nil) {
			v.problem(ReasonContainer, name, "the file appears twice")
			return false
		}
		if name == nameManifest {
			manifest = data
			return true
		}
		v.files[name] = data
		v.order = append(v.order, name)
		return true
	}
	trimmed := bytes.TrimLeft(bundle, " \t\r\n")
	switch {
	case len(trimmed) > 0 && trimmed[0] == '{':
		container = FormatJSON
		dec := jsontext.NewDecoder(bytes.NewReader(bundle))
		if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
			v.problem(ReasonContainer, "", "not a JSON object: %v", err)
			return nil, ""
		}
		for dec.PeekKind() == '"' {
			tok, err := dec.ReadToken()
			if err != nil {
				v.problem(ReasonContainer, "", "malformed JSON: %v", err)
				return nil, ""
			}
			name := tok.String()
			val, err := dec.ReadValue()
			if err != nil {
				v.problem(ReasonContainer, name, "malformed JSON: %v", err)
				return nil, ""
			}
			if !add(name, bytes.Clone(val)) {
				return nil, ""
			}
		}
		if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' {
			v.problem(ReasonContainer, "", "malformed JSON: %v", err)
			return nil, ""
		}
		if _, err := dec.ReadToken(); err != io.EOF {
			v.problem(ReasonContainer, "", "data after the JSON document")
			return nil, ""
		}
	case bytes.HasPrefix(bundle, []byte("PK\x03\x04")):
		container = FormatCSV
		zr, err := zip.NewReader(bytes.NewReader(bundle), int64(len(bundle)))
		if err != nil {
			v.problem(ReasonContainer, "", "not a readable zip: %v", err)
			return nil, ""
		}
		var total int64
		for _, f := range zr.File {
			name := f.Name
			if name == nameManifest {
				name = "manifest (as a zip entry)" // only manifest.json is the manifest
			}
			if name == nameManifest+".json" {
				name = nameManifest
			}
			if strings.ContainsAny(f.Name, "/\\") || f.FileInfo().IsDir() {
				v.problem(ReasonContainer, f.Name, "packs hold plain files only")
				return nil, ""
			}
			rc, err := f.Open()
			if err != nil {
				v.problem(ReasonContainer, f.Name, "unreadable entry: %v", err)
				return nil, ""
			}
			data, err := io.ReadAll(io.LimitReader(rc, maxUnpacked-total+1))
			rc.Close()
			total += int64(len(data))
			if err != nil || total > maxUnpacked {
				v.problem(ReasonContainer, f.Name, "unreadable entry (or over %d bytes unpacked): %v", int64(maxUnpacked), err)
				return nil, ""
			}
			if !add(name, data) {
				return nil, ""
			}
		}
	default:
		v.problem(ReasonContainer, "", "neither a JSON document nor a zip archive")
		return nil, ""
	}
	if manifest == nil {
		v.problem(ReasonManifestMissing, "", "the pack has no manifest")
	}
	return manifest, container
}

// expected returns the data file names a manifest's pack holds, in order.
func expected(m *Manifest) []string {
	var names []string
	for _, n := range []string{nameEvents, nameDecisions, nameGrants, nameWorkflows} {
		if n == nameDecisions || m.IncludeEvents {
			if m.Format == FormatJSON {
				names = append(names, n)
			} else {
				names = append(names, n+".csv")
			}
		}
	}
	if m.Format == FormatPDF {
		names = append(names, nameReport)
	}
	return names
}

// checkManifest checks the manifest's own shape; false stops verification.
func (v *verifier) checkManifest(container Format) bool {
	m := &v.m
	bad := func(format string, args ...any) bool {
		v.problem(ReasonManifestInvalid, "", format, args...)
		return false
	}
	if m.PackVersion != PackVersion {
		return bad("pack_version %q, this verifier reads %q", m.PackVersion, PackVersion)
	}
	if _, err := ParseFormat(string(m.Format)); err != nil {
		return bad("%v", err)
	}
	if (m.Format == FormatJSON) != (container == FormatJSON) {
		return bad("format %q in a %s container", m.Format, map[bool]string{true: "JSON", false: "zip"}[container == FormatJSON])
	}
	if m.OrgID == "" || m.ExportID == "" {
		return bad("org_id and export_id are required")
	}
	if !m.Window.From.Before(m.Window.To) {
		return bad("the window is empty")
	}
	want := expected(m)
	var got []string
	for _, f := range m.Files {
		got = append(got, f.Name)
	}
	if !slices.Equal(got, want) {
		return bad("files %v, a %s pack (include_events %v) lists %v", got, m.Format, m.IncludeEvents, want)
	}
	return true
}

func (v *verifier) checkFiles() {
	v.checked("file hashes")
	listed := map[string]bool{}
	for _, f := range v.m.Files {
		listed[f.Name] = true
		data, ok := v.files[f.Name]
		switch {
		case !ok:
			v.problem(ReasonFileMissing, f.Name, "listed in the manifest, absent from the pack")
		case Digest(data) != f.SHA256 || int64(len(data)) != f.Bytes:
			v.problem(ReasonFileHash, f.Name, "%s (%d bytes), the manifest says %s (%d bytes)", Digest(data), len(data), f.SHA256, f.Bytes)
		}
	}
	for _, name := range v.order {
		if !listed[name] {
			v.problem(ReasonFileUnexpected, name, "in the pack, not in the manifest")
		}
	}
}

// readRows parses a data file of the pack (JSON array or CSV with a header
// row); nil after a problem.
func readRows[T any](v *verifier, name string, columns []string, parse func([]string) (T, error)) []T {
	file := name
	if v.m.Format != FormatJSON {
		file += ".csv"
	}
	data, ok := v.files[file]
	if !ok {
		return nil
	}
	if v.m.Format == FormatJSON {
		var rows []T
		if err := json.Unmarshal(data, &rows, json.RejectUnknownMembers(true)); err != nil {
			v.problem(ReasonFileInvalid, file, "%v", err)
			return nil
		}
		if rows == nil {
			v.problem(ReasonFileInvalid, file, "not a JSON array")
		}
		return rows
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = len(columns)
	head, err := r.Read()
	if err != nil || !slices.Equal(head, columns) {
		v.problem(ReasonFileInvalid, file, "the header row is not %s", strings.Join(columns, ","))
		return nil
	}
	rows := []T{}
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			return rows
		}
		if err != nil {
			v.problem(ReasonFileInvalid, file, "%v", err)
			return nil
		}
		row, err := parse(rec)
		if err != nil {
			v.problem(ReasonFileInvalid, file, "row %d: %v", line, err)
			return nil
		}
		rows = append(rows, row)
	}
}

func (v *verifier) fileRows(name string) (string, int) {
	for _, f := range v.m.Files {
		if f.Name == name || f.Name == name+".csv" {
			return f.Name, f.Rows
		}
	}
	return name, -1
}

func (v *verifier) checkCounts(decisions []Decision, events []ledger.Entry, grants []Grant, workflows []Workflow) {
	v.checked("counts")
	c := v.m.Counts
	count := func(name string, rows, counted int, ok bool) {
		if !ok {
			return // unreadable: reported already
		}
		file, listed := v.fileRows(name)
		if rows != counted || rows != listed {
			v.problem(ReasonCount, file, "%d rows, the manifest counts %d and lists %d", rows, counted, listed)
		}
	}
	count(nameDecisions, len(decisions), c.Decisions, decisions != nil)
	byOutcome := map[string]int{}
	for _, o := range Outcomes {
		byOutcome[o] = 0
	}
	for _, d := range decisions {
		byOutcome[d.Outcome]++
	}
	if decisions != nil && !maps.Equal(byOutcome, c.ByOutcome) {
		v.problem(ReasonCount, "", "decisions by outcome are %v, the manifest counts %v", byOutcome, c.ByOutcome)
	}
	if v.m.IncludeEvents {
		count(nameEvents, len(events), c.Events, events != nil)
		count(nameGrants, len(grants), c.Grants, grants != nil)
		count(nameWorkflows, len(workflows), c.Workflows, workflows != nil)
		if events != nil && uint64(c.Events) != v.m.Ledger.Size {
			v.problem(ReasonCount, "", "the manifest counts %d events for a checkpoint of %d entries", c.Events, v.m.Ledger.Size)
		}
	} else if c.Events != 0 || c.Grants != 0 || c.Workflows != 0 {
		v.problem(ReasonCount, "", "a pack without events counts events, grants or workflows")
	}
}

// checkLedger checks the anchor: the checkpoint (signature, origin, size
// and root) and, with events, the chain and its root.
func (v *verifier) checkLedger(events []ledger.Entry) {
	l := v.m.Ledger
	if !strings.HasSuffix(l.Origin, "/ledger/"+v.m.OrgID) {
		v.problem(ReasonCheckpointInvalid, "", "origin %q is not the ledger of org %s", l.Origin, v.m.OrgID)
	}
	if l.Signed {
		var cp ledger.Checkpoint
		var err error
		if v.opts.LedgerVerifierKey != "" {
			v.checked("checkpoint signature")
			cp, err = ledger.VerifyCheckpoint(v.opts.LedgerVerifierKey, []byte(l.Checkpoint))
		} else {
			v.skipped("checkpoint signature: no ledger verifier key given")
			cp, err = unverifiedCheckpoint(l.Checkpoint)
		}
		switch {
		case err != nil:
			v.problem(ReasonCheckpointInvalid, "", "%v", err)
		case cp.Origin != l.Origin:
			v.problem(ReasonCheckpointInvalid, "", "the checkpoint is of log %q, the manifest names %q", cp.Origin, l.Origin)
		case cp.Size != l.Size || base64.StdEncoding.EncodeToString(cp.Root[:]) != l.RootHash:
			v.problem(ReasonCheckpointMismatch, "", "the checkpoint is size %d root %s, the manifest says size %d root %s",
				cp.Size, base64.StdEncoding.EncodeToString(cp.Root[:]), l.Size, l.RootHash)
		}
	} else {
		v.skipped("checkpoint signature: the pack is not signed (" + l.UnsignedReason + ")")
	}
	if !v.m.IncludeEvents {
		v.skipped("ledger completeness: the pack has no events (include_events false); prove its decisions with inclusion proofs")
		return
	}
	if events == nil {
		return
	}
	v.checked("ledger chain and root")
	var prev ledger.Entry
	var tree treeHasher
	for _, e := range events {
		if why := checkEntry(prev, e, v.m.OrgID); why != "" {
			v.problem(ReasonChainBroken, v.fileName(nameEvents), "%s", why)
			return
		}
		leaf, err := e.LeafHash()
		if err != nil {
			v.problem(ReasonChainBroken, v.fileName(nameEvents), "entry %d: %v", e.Seq, err)
			return
		}
		tree.add(leaf)
		prev = e
	}
	if prev.Seq != l.Size {
		v.problem(ReasonLedgerIncomplete, v.fileName(nameEvents), "events end at seq %d, the checkpoint covers %d", prev.Seq, l.Size)
		return
	}
	root := tree.root()
	if got := base64.StdEncoding.EncodeToString(root[:]); got != l.RootHash || prev.EntryHash != l.HeadEntryHash {
		v.problem(ReasonRootMismatch, v.fileName(nameEvents), "the events hash to root %s head %s, the manifest says root %s head %s",
			got, prev.EntryHash, l.RootHash, l.HeadEntryHash)
	}
}

func (v *verifier) fileName(name string) string {
	if v.m.Format == FormatJSON {
		return name
	}
	return name + ".csv"
}

// checkDecisions checks the decision rows: in seq order within the
// checkpoint and the window, and, with events, equal to the ledger's
// decision entries in the window, one for one.
func (v *verifier) checkDecisions(decisions []Decision, events []ledger.Entry) {
	if decisions == nil {
		return
	}
	file := v.fileName(nameDecisions)
	v.checked("decisions in order, in the window and within the checkpoint")
	var last uint64
	for _, d := range decisions {
		if d.LedgerSeq <= last || d.LedgerSeq > v.m.Ledger.Size {
			v.problem(ReasonDecisionInvalid, file, "decision %s: seq %d after seq %d, checkpoint size %d", d.DossierID, d.LedgerSeq, last, v.m.Ledger.Size)
		}
		last = d.LedgerSeq
		if t, err := time.Parse(time.RFC3339Nano, d.CreatedAt); err != nil || !v.m.Window.Contains(t) {
			v.problem(ReasonDecisionWindow, file, "decision %s at %q is outside the window", d.DossierID, d.CreatedAt)
		}
	}
	if events == nil || uint64(len(events)) != v.m.Ledger.Size {
		return
	}
	v.checked("decisions against the ledger, and every ledgered decision of the window present")
	rows := map[uint64]bool{}
	for _, d := range decisions {
		rows[d.LedgerSeq] = true
		if d.LedgerSeq == 0 || d.LedgerSeq > uint64(len(events)) {
			continue
		}
		e := events[d.LedgerSeq-1]
		if e.Kind != ledger.KindDecision || e.SubjectID != d.DossierID || e.PayloadDigest != d.DossierDigest ||
			e.EntryHash != d.EntryHash || e.RecordedAt != d.CreatedAt {
			v.problem(ReasonDecisionLedger, file, "decision %s is not the ledger's entry %d (%s %s %s)", d.DossierID, d.LedgerSeq,
				e.Kind, e.SubjectID, e.PayloadDigest)
		}
	}
	for _, e := range events {
		if e.Kind != ledger.KindDecision || rows[e.Seq] {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, e.RecordedAt); err == nil && v.m.Window.Contains(t) {
			v.problem(ReasonDecisionMissing, file, "the ledger records decision %s at seq %d in the window, the pack has no row for it", e.SubjectID, e.Seq)
		}
	}
}

// checkGrants checks that grants belong to the pack's decisions and that the
// workflow coverage is what the decisions and grants add up to.
func (v *verifier) checkGrants(decisions []Decision, grants []Grant, workflows []Workflow) {
	if decisions == nil || grants == nil {
		return
	}
	v.checked("grants of the pack's decisions")
	byDecision := make(map[string]Decision, len(decisions))
	for _, d := range decisions {
		byDecision[d.DecisionID] = d
	}
	derived := map[string]*Workflow{}
	wf := func(key string) *Workflow {
		if derived[key] == nil {
			derived[key] = newWorkflow(key)
		}
		return derived[key]
	}
	for _, d := range decisions {
		w := wf(d.WorkflowKey)
		w.Decisions++
		w.ByOutcome[d.Outcome]++
		switch d.Mode {
		case "SHADOW":
			w.Shadow++
		case "ENFORCEMENT":
			w.Enforcement++
		}
	}
	for _, g := range grants {
		d, ok := byDecision[g.DecisionID]
		if !ok || d.DossierID != g.DossierID || d.WorkflowKey != g.WorkflowKey {
			v.problem(ReasonGrantDecision, v.fileName(nameGrants), "grant %s names decision %s, not one of the pack's", g.GrantID, g.DecisionID)
		}
		if !slices.Contains(GrantStates, g.State) {
			v.problem(ReasonFileInvalid, v.fileName(nameGrants), "grant %s has state %q", g.GrantID, g.State)
		}
		w := wf(g.WorkflowKey)
		w.Grants++
		w.GrantsByState[g.State]++
	}
	if workflows == nil {
		return
	}
	v.checked("workflow coverage")
	keys := slices.Sorted(maps.Keys(derived))
	ok := len(keys) == len(workflows)
	for i := 0; ok && i < len(keys); i++ {
		a, b := derived[keys[i]], workflows[i]
		ok = a.WorkflowKey == b.WorkflowKey && a.Decisions == b.Decisions && a.Shadow == b.Shadow &&
			a.Enforcement == b.Enforcement && a.Grants == b.Grants && maps.Equal(a.ByOutcome, b.ByOutcome) &&
			maps.Equal(a.GrantsByState, b.GrantsByState)
	}
	if !ok {
		v.problem(ReasonWorkflows, v.fileName(nameWorkflows), "the workflow rows are not what the pack's decisions and grants add up to")
	}
}

// unverifiedCheckpoint reads a checkpoint note without checking its
// signature: origin, size and root of its text.
func unverifiedCheckpoint(note string) (ledger.Checkpoint, error) {
	text, _, ok := strings.Cut(note, "\n\n")
	lines := strings.Split(text, "\n")
	if !ok || len(lines) < 3 {
		return ledger.Checkpoint{}, fmt.Errorf("%w: not a signed note", ledger.ErrCheckpointFormat)
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	raw, err2 := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || err2 != nil || len(raw) != 32 {
		return ledger.Checkpoint{}, fmt.Errorf("%w: not a checkpoint body", ledger.ErrCheckpointFormat)
	}
	c := ledger.Checkpoint{Origin: lines[0], Size: size}
	copy(c.Root[:], raw)
	return c, nil
}

var (
	pageObject = regexp.MustCompile(`/Type\s*/Page[\s/>]`)
	pagesCount = regexp.MustCompile(`/Count\s+(\d+)`)
	startXref  = regexp.MustCompile(`startxref\s+(\d+)\s+%%EOF\s*$`)
)

// CheckPDF checks that b is a complete PDF with pages: the %PDF-1.x header,
// a startxref that points at the cross-reference table, the %%EOF trailer,
// a trailer naming the catalog, and a page tree whose /Count is the number
// of its page objects (at least one). It returns the page count.
func CheckPDF(b []byte) (int, error) {
	if !bytes.HasPrefix(b, []byte("%PDF-1.")) {
		return 0, errors.New("no %PDF-1.x header")
	}
	m := startXref.FindSubmatch(b)
	if m == nil {
		return 0, errors.New("no startxref and %%EOF trailer at the end")
	}
	off, err := strconv.Atoi(string(m[1]))
	if err != nil || off <= 0 || off >= len(b) || !bytes.HasPrefix(b[off:], []byte("xref")) {
		return 0, errors.New("startxref does not point at the cross-reference table")
	}
	trailer := b[off:]
	if !bytes.Contains(trailer, []byte("trailer")) || !bytes.Contains(trailer, []byte("/Root")) {
		return 0, errors.New("no trailer naming the catalog")
	}
	i := bytes.Index(b, []byte("/Type /Pages"))
	if i < 0 {
		return 0, errors.New("no page tree")
	}
	start := bytes.LastIndex(b[:i], []byte("<<"))
	end := bytes.Index(b[i:], []byte(">>"))
	if start < 0 || end < 0 {
		return 0, errors.New("malformed page tree")
	}
	c := pagesCount.FindSubmatch(b[start : i+end])
	if c == nil {
		return 0, errors.New("the page tree has no /Count")
	}
	count, err := strconv.Atoi(string(c[1]))
	if err != nil || count < 1 {
		return 0, errors.New("the page tree counts no pages")
	}
	if n := len(pageObject.FindAll(b, -1)); n != count {
		return 0, fmt.Errorf("the page tree counts %d pages, the file has %d page objects", count, n)
	}
	return count, nil
}
