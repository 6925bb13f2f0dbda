package pack

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"slices"
	"time"

	"github.com/clearancehq/clearance/ledger"
)

// Header is what a pack covers, known before its build starts.
type Header struct {
	OrgID         string
	ExportID      string
	Format        Format
	Window        Window
	IncludeEvents bool
	GeneratedAt   time.Time
	// Ledger anchors the pack. Exactly Ledger.Size entries are fed to
	// AddEntry. When Ledger.Signed, Ledger.RootHash and Ledger.Checkpoint
	// are set and the entries must hash to that root; otherwise Close fills
	// RootHash with the root the entries hash to.
	Ledger Ledger
}

// Result is a built pack's manifest, its exact bytes and their digest
// (manifest_sha256).
type Result struct {
	Manifest       Manifest
	ManifestBytes  []byte
	ManifestSHA256 string
}

// MaxReportRows bounds the decisions report.pdf lists; the machine-readable
// files hold every decision.
const MaxReportRows = 500

// Builder writes one pack to an io.Writer as it is fed, holding in memory
// only the report's first rows and the workflow totals. Feed it in order:
// every ledger entry 1..Ledger.Size (AddEntry), then the decisions in
// ascending ledger seq (AddDecision), then, with IncludeEvents, the grants
// (AddGrant); then Close. The first error is sticky.
type Builder struct {
	h     Header
	out   io.Writer
	zw    *zip.Writer // csv and pdf
	stage int
	err   error

	files []File
	sec   *section

	prev ledger.Entry // last entry fed
	tree treeHasher

	decisions  int
	lastSeq    uint64
	byOutcome  map[string]int
	workflows  map[string]*Workflow
	reportRows []Decision
	grants     int
}

// Builder stages.
const (
	stageEntries = iota
	stageDecisions
	stageGrants
	stageClosed
)

// NewBuilder starts a pack described by h on w.
func NewBuilder(w io.Writer, h Header) (*Builder, error) {
	if _, err := ParseFormat(string(h.Format)); err != nil {
		return nil, err
	}
	if h.OrgID == "" || h.ExportID == "" {
		return nil, fmt.Errorf("%w: org and export ids are required", ErrInput)
	}
	if !h.Window.From.Before(h.Window.To) {
		return nil, fmt.Errorf("%w: the window is empty", ErrInput)
	}
	if h.Ledger.Signed && (h.Ledger.RootHash == "" || h.Ledger.Checkpoint == "") {
		return nil, fmt.Errorf("%w: a signed anchor needs its root and checkpoint", ErrInput)
	}
	h.Window = Window{From: h.Window.From.UTC(), To: h.Window.To.UTC()}
	h.GeneratedAt = h.GeneratedAt.UTC()
	b := &Builder{h: h, out: w, byOutcome: map[string]int{}, workflows: map[string]*Workflow{}}
	for _, o := range Outcomes {
		b.byOutcome[o] = 0
	}
	if h.Format == FormatJSON {
		if _, err := io.WriteString(w, "{\n"); err != nil {
			return nil, err
		}
	} else {
		b.zw = zip.NewWriter(w)
	}
	if h.IncludeEvents {
		if err := b.begin(nameEvents, eventColumns); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// AddEntry feeds the org's next ledger entry (seq 1 first). It must continue
// the chain; it is written to the pack when IncludeEvents.
func (b *Builder) AddEntry(e ledger.Entry) error {
	if b.err != nil {
		return b.err
	}
	if b.stage != stageEntries {
		return b.fail(fmt.Errorf("%w: entries come before decisions", ErrOrder))
	}
	if e.Seq > b.h.Ledger.Size {
		return b.fail(fmt.Errorf("%w: entry %d is beyond the anchor's size %d", ErrLedger, e.Seq, b.h.Ledger.Size))
	}
	if why := checkEntry(b.prev, e, b.h.OrgID); why != "" {
		return b.fail(fmt.Errorf("%w: %s", ErrLedger, why))
	}
	leaf, err := e.LeafHash()
	if err != nil {
		return b.fail(err)
	}
	b.tree.add(leaf)
	b.prev = e
	if b.h.IncludeEvents {
		return b.row(e, eventRecord(e))
	}
	return nil
}

// AddDecision feeds the next decision, in ascending ledger seq; its seq is
// at most the anchor's size and its time lies in the window.
func (b *Builder) AddDecision(d Decision) error {
	if b.err != nil {
		return b.err
	}
	if b.stage > stageDecisions {
		return b.fail(fmt.Errorf("%w: decisions come before grants", ErrOrder))
	}
	if b.stage == stageEntries {
		if err := b.endEntries(); err != nil {
			return err
		}
	}
	switch t, err := time.Parse(time.RFC3339Nano, d.CreatedAt); {
	case d.LedgerSeq == 0 || d.LedgerSeq > b.h.Ledger.Size:
		return b.fail(fmt.Errorf("%w: decision %s has seq %d, outside the anchor's 1..%d", ErrInput, d.DossierID, d.LedgerSeq, b.h.Ledger.Size))
	case d.LedgerSeq <= b.lastSeq:
		return b.fail(fmt.Errorf("%w: decision seq %d after seq %d", ErrInput, d.LedgerSeq, b.lastSeq))
	case err != nil || !b.h.Window.Contains(t):
		return b.fail(fmt.Errorf("%w: decision %s at %q is outside the window", ErrInput, d.DossierID, d.CreatedAt))
	}
	b.lastSeq = d.LedgerSeq
	b.decisions++
	b.byOutcome[d.Outcome]++
	w := b.workflow(d.WorkflowKey)
	w.Decisions++
	w.ByOutcome[d.Outcome]++
	switch d.Mode {
	case "SHADOW":
		w.Shadow++
	case "ENFORCEMENT":
		w.Enforcement++
	}
	if len(b.reportRows) < MaxReportRows {
		b.reportRows = append(b.reportRows, d)
	}
	return b.row(d, decisionRecord(d))
}

// AddGrant feeds a grant of one of the pack's decisions (IncludeEvents only).
func (b *Builder) AddGrant(g Grant) error {
	if b.err != nil {
		return b.err
	}
	if !b.h.IncludeEvents {
		return b.fail(fmt.Errorf("%w: grants are part of a pack only with include_events", ErrInput))
	}
	if b.stage == stageClosed {
		return b.fail(fmt.Errorf("%w: the pack is closed", ErrOrder))
	}
	if err := b.toStage(stageGrants); err != nil {
		return err
	}
	b.grants++
	w := b.workflow(g.WorkflowKey)
	w.Grants++
	w.GrantsByState[g.State]++
	return b.row(g, grantRecord(g))
}

func (b *Builder) workflow(key string) *Workflow {
	w := b.workflows[key]
	if w == nil {
		w = newWorkflow(key)
		b.workflows[key] = w
	}
	return w
}

// toStage ends the sections before stage and begins stage's.
func (b *Builder) toStage(stage int) error {
	for b.stage < stage {
		switch b.stage {
		case stageEntries:
			if err := b.endEntries(); err != nil {
				return err
			}
		case stageDecisions:
			if err := b.end(); err != nil {
				return err
			}
			b.stage = stageGrants
			if b.h.IncludeEvents {
				if err := b.begin(nameGrants, grantColumns); err != nil {
					return err
				}
			}
		default:
			b.stage++
		}
	}
	return nil
}

// endEntries checks the ledger against the anchor, ends the events file
// and begins the decisions file.
func (b *Builder) endEntries() error {
	l := &b.h.Ledger
	if b.prev.Seq != l.Size {
		return b.fail(fmt.Errorf("%w: %d entries fed, the anchor has %d", ErrLedger, b.prev.Seq, l.Size))
	}
	root := b.tree.root()
	enc := base64.StdEncoding.EncodeToString(root[:])
	if l.Signed && l.RootHash != enc {
		return b.fail(fmt.Errorf("%w: the %d entries hash to %s, the checkpoint says %s", ErrLedger, l.Size, enc, l.RootHash))
	}
	l.RootHash, l.HeadEntryHash = enc, b.prev.EntryHash
	if b.h.IncludeEvents {
		if err := b.end(); err != nil {
			return err
		}
	}
	b.stage = stageDecisions
	return b.begin(nameDecisions, decisionColumns)
}

// Close writes the remaining files (grants and workflows with
// IncludeEvents, report.pdf for FormatPDF) and the manifest, and finishes
// the container. It does not close the underlying writer.
func (b *Builder) Close() (Result, error) {
	if b.err != nil {
		return Result{}, b.err
	}
	if b.stage == stageClosed {
		return Result{}, fmt.Errorf("%w: closed twice", ErrOrder)
	}
	if err := b.toStage(stageGrants); err != nil {
		return Result{}, err
	}
	if b.h.IncludeEvents {
		if err := b.end(); err != nil {
			return Result{}, err
		}
		if err := b.begin(nameWorkflows, workflowColumns); err != nil {
			return Result{}, err
		}
		for _, w := range b.sortedWorkflows() {
			if err := b.row(w, workflowRecord(w)); err != nil {
				return Result{}, err
			}
		}
		if err := b.end(); err != nil {
			return Result{}, err
		}
	}
	b.stage = stageClosed
	m := Manifest{
		PackVersion: PackVersion, OrgID: b.h.OrgID, ExportID: b.h.ExportID, Format: b.h.Format, Window: b.h.Window,
		IncludeEvents: b.h.IncludeEvents, GeneratedAt: b.h.GeneratedAt.Format(TimeFormat),
		Counts: Counts{Decisions: b.decisions, ByOutcome: b.byOutcome, Grants: b.grants},
		Ledger: b.h.Ledger,
	}
	if b.h.IncludeEvents {
		m.Counts.Events, m.Counts.Workflows = int(b.h.Ledger.Size), len(b.workflows)
	}
	if b.h.Format == FormatPDF {
		m.Files = slices.Clone(b.files)
		pdf, err := renderReport(m, b.reportRows, b.sortedWorkflows())
		if err != nil {
			return Result{}, b.fail(fmt.Errorf("export: render report.pdf: %w", err))
		}
		if err := b.writeFile(nameReport, "application/pdf", zip.Store, pdf); err != nil {
			return Result{}, err
		}
	}
	m.Files = b.files
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Result{}, b.fail(err)
	}
	if b.h.Format == FormatJSON {
		if _, err := fmt.Fprintf(b.out, ",\n%q: ", nameManifest); err != nil {
			return Result{}, b.fail(err)
		}
		if _, err := b.out.Write(raw); err != nil {
			return Result{}, b.fail(err)
		}
		if _, err := io.WriteString(b.out, "\n}\n"); err != nil {
			return Result{}, b.fail(err)
		}
	} else {
		w, err := b.zw.CreateHeader(b.zipHeader(nameManifest+".json", zip.Deflate))
		if err != nil {
			return Result{}, b.fail(err)
		}
		if _, err := w.Write(raw); err != nil {
			return Result{}, b.fail(err)
		}
		if err := b.zw.Close(); err != nil {
			return Result{}, b.fail(err)
		}
	}
	return Result{Manifest: m, ManifestBytes: raw, ManifestSHA256: Digest(raw)}, nil
}

func (b *Builder) sortedWorkflows() []Workflow {
	out := make([]Workflow, 0, len(b.workflows))
	for _, w := range b.workflows {
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, c Workflow) int {
		switch {
		case a.WorkflowKey < c.WorkflowKey:
			return -1
		case a.WorkflowKey > c.WorkflowKey:
			return 1
		}
		return 0
	})
	return out
}

func (b *Builder) fail(err error) error {
	if b.err == nil {
		b.err = err
	}
	return b.err
}

// section is the file being written.
type section struct {
	name, mediaType string
	w               io.Writer // hashes and counts, then writes on
	h               hash.Hash
	n               *int64
	rows            int
	csv             *csv.Writer // csv formats
}

type counter struct {
	w io.Writer
	n *int64
}

func (c counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	*c.n += int64(n)
	return n, err
}

// fileName is a file's name in the pack's container.
func (b *Builder) fileName(name string) string {
	if b.h.Format == FormatJSON {
		return name
	}
	return name + ".csv"
}

func (b *Builder) zipHeader(name string, method uint16) *zip.FileHeader {
	return &zip.FileHeader{Name: name, Method: method, Modified: b.h.GeneratedAt}
}

// begin starts the data file name.
func (b *Builder) begin(name string, columns []string) error {
	var dst io.Writer
	s := &section{name: b.fileName(name), h: sha256.New(), n: new(int64)}
	if b.h.Format == FormatJSON {
		sep := ""
		if len(b.files) > 0 {
			sep = ",\n"
		}
		if _, err := fmt.Fprintf(b.out, "%s%q: ", sep, name); err != nil {
			return b.fail(err)
		}
		dst, s.mediaType = b.out, "application/json"
	} else {
		w, err := b.zw.CreateHeader(b.zipHeader(s.name, zip.Deflate))
		if err != nil {
			return b.fail(err)
		}
		dst, s.mediaType = w, "text/csv"
	}
	s.w = counter{io.MultiWriter(dst, s.h), s.n}
	b.sec = s
	if b.h.Format == FormatJSON {
		_, err := io.WriteString(s.w, "[")
		return b.failIf(err)
	}
	s.csv = csv.NewWriter(s.w)
	return b.failIf(s.csv.Write(columns))
}

// row writes one row of the current file: v as a JSON object, or record.
func (b *Builder) row(v any, record []string) error {
	s := b.sec
	if s.csv != nil {
		s.rows++
		return b.failIf(s.csv.Write(record))
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return b.fail(err)
	}
	sep := "\n"
	if s.rows > 0 {
		sep = ",\n"
	}
	s.rows++
	if _, err := io.WriteString(s.w, sep); err != nil {
		return b.fail(err)
	}
	_, err = s.w.Write(raw)
	return b.failIf(err)
}

// end finishes the current file and lists it.
func (b *Builder) end() error {
	s := b.sec
	if s == nil {
		return nil
	}
	b.sec = nil
	if s.csv != nil {
		s.csv.Flush()
		if err := s.csv.Error(); err != nil {
			return b.fail(err)
		}
	} else {
		tail := "]"
		if s.rows > 0 {
			tail = "\n]"
		}
		if _, err := io.WriteString(s.w, tail); err != nil {
			return b.fail(err)
		}
	}
	b.files = append(b.files, File{Name: s.name, MediaType: s.mediaType, SHA256: "sha256:" + hex.EncodeToString(s.h.Sum(nil)),
		Bytes: *s.n, Rows: s.rows})
	return nil
}

// writeFile adds a whole file (report.pdf) to a zip pack.
func (b *Builder) writeFile(name, mediaType string, method uint16, data []byte) error {
	w, err := b.zw.CreateHeader(b.zipHeader(name, method))
	if err != nil {
		return b.fail(err)
	}
	if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
		return b.fail(err)
	}
	b.files = append(b.files, File{Name: name, MediaType: mediaType, SHA256: Digest(data), Bytes: int64(len(data))})
	return nil
}

func (b *Builder) failIf(err error) error {
	if err != nil {
		return b.fail(err)
	}
	return nil
}
