package pack

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/signintech/gopdf"
	"golang.org/x/image/font/gofont/gomono"
	"golang.org/x/image/font/gofont/goregular"
)

// Page geometry of report.pdf (A4, points).
const (
	pageW, pageH = 595.28, 841.89
	margin       = 40.0
	bottom       = pageH - margin
)

// report lays out report.pdf top to bottom, adding pages as it goes.
type report struct {
	pdf  *gopdf.GoPdf
	y    float64
	page int
	err  error
}

// renderReport draws the human-readable report of a pack: a summary page
// (what it covers, its counts, the ledger anchor and the hashes of its data
// files), the workflow coverage and the first MaxReportRows decisions.
func renderReport(m Manifest, rows []Decision, workflows []Workflow) ([]byte, error) {
	pdf := &gopdf.GoPdf{}
	pdf.Start(gopdf.Config{PageSize: *gopdf.PageSizeA4})
	generated, _ := time.Parse(TimeFormat, m.GeneratedAt)
	pdf.SetInfo(gopdf.PdfInfo{Title: "Clearance validation pack " + m.ExportID, Author: "Clearance",
		Subject: "Validation pack of organization " + m.OrgID, Creator: "Clearance", Producer: "Clearance",
		CreationDate: generated})
	if err := pdf.AddTTFFontData("sans", goregular.TTF); err != nil {
		return nil, err
	}
	if err := pdf.AddTTFFontData("mono", gomono.TTF); err != nil {
		return nil, err
	}
	r := &report{pdf: pdf}
	r.newPage()

	r.text("sans", 18, margin, "Clearance validation pack", 26)
	yes := map[bool]string{true: "yes", false: "no"}
	for _, kv := range [][2]string{
		{"Organization", m.OrgID},
		{"Export", m.ExportID},
		{"Format", string(m.Format) + "    include events: " + yes[m.IncludeEvents]},
		{"Window", m.Window.From.Format(TimeFormat) + "  to  " + m.Window.To.Format(TimeFormat) + " (UTC, end excluded)"},
		{"Generated", m.GeneratedAt},
		{"Decisions", fmt.Sprintf("%d  (ALLOW %d, ESCALATE %d, REVIEW_REQUIRED %d, BLOCK %d)", m.Counts.Decisions,
			m.Counts.ByOutcome["ALLOW"], m.Counts.ByOutcome["ESCALATE"], m.Counts.ByOutcome["REVIEW_REQUIRED"], m.Counts.ByOutcome["BLOCK"])},
	} {
		r.pair(kv[0], kv[1])
	}
	if m.IncludeEvents {
		r.pair("Coverage", fmt.Sprintf("%d ledger events, %d grants, %d workflows", m.Counts.Events, m.Counts.Grants, m.Counts.Workflows))
	}

	r.heading("Ledger checkpoint")
	l := m.Ledger
	r.pair("Origin", l.Origin)
	r.pair("Tree size", fmt.Sprintf("%d entries", l.Size))
	r.pair("Root hash", l.RootHash)
	r.pair("Head entry", l.HeadEntryHash)
	if l.Signed {
		r.pair("Signed", "yes, by the ledger key")
		r.text("mono", 7, margin+10, l.VerifierKey, 9)
		r.gap(4)
		for _, line := range strings.Split(strings.TrimRight(l.Checkpoint, "\n"), "\n") {
			r.text("mono", 7, margin+10, line, 9)
		}
	} else {
		r.pair("Signed", "no: "+l.UnsignedReason+" (the root is the one this pack's builder computed)")
	}

	r.heading("Files")
	for _, f := range m.Files {
		r.text("mono", 7, margin, fmt.Sprintf("%-16s %9d bytes %8d rows  %s", f.Name, f.Bytes, f.Rows, f.SHA256), 10)
	}
	r.text("mono", 7, margin, fmt.Sprintf("%-16s (this report; its hash is in manifest.json)", nameReport), 10)

	r.heading("How to read this pack")
	shown := len(rows)
	for _, p := range []string{
		fmt.Sprintf("This report lists the first %d of the pack's %d decisions in ledger order.", shown, m.Counts.Decisions),
		"The machine-readable files and manifest.json are authoritative; this report only summarizes them.",
		"manifest_sha256, bundle_sha256 and bundle_signature_hmac_sha256 are recorded on the export record.",
		"With include events, events.csv holds ledger entries 1 to the tree size: recomputing their RFC 9162",
		"root must give the root hash above, which the ledger key signed in the checkpoint.",
	} {
		r.text("sans", 9, margin, p, 12)
	}

	if m.IncludeEvents && len(workflows) > 0 {
		r.heading("Workflows")
		cols := []float64{margin, margin + 190, margin + 240, margin + 285, margin + 335, margin + 385, margin + 425, margin + 470}
		r.tableRow("mono", 7, cols, []string{"workflow_key", "decisions", "ALLOW", "ESCALATE", "REVIEW", "BLOCK", "shadow", "grants"})
		for i, w := range workflows {
			if i == 40 {
				r.text("sans", 8, margin, fmt.Sprintf("… and %d more workflows (workflows.csv lists them all).", len(workflows)-40), 11)
				break
			}
			r.tableRow("mono", 7, cols, []string{w.WorkflowKey, itoa(w.Decisions), itoa(w.ByOutcome["ALLOW"]),
				itoa(w.ByOutcome["ESCALATE"]), itoa(w.ByOutcome["REVIEW_REQUIRED"]), itoa(w.ByOutcome["BLOCK"]),
				itoa(w.Shadow), itoa(w.Grants)})
		}
	}

	r.heading(fmt.Sprintf("Decisions (first %d of %d)", shown, m.Counts.Decisions))
	cols := []float64{margin, margin + 30, margin + 142, margin + 204, margin + 254, margin + 324, margin + 384}
	head := []string{"seq", "created_at", "outcome", "mode", "workflow_key", "decision_type", "dossier_id"}
	r.tableRow("mono", 6, cols, head)
	for _, d := range rows {
		if r.y+9 > bottom {
			r.newPage()
			r.tableRow("mono", 6, cols, head)
		}
		r.tableRow("mono", 6, cols, []string{u64(d.LedgerSeq), d.CreatedAt, d.Outcome, d.Mode, d.WorkflowKey,
			d.DecisionType, d.DossierID})
	}
	if shown == 0 {
		r.text("sans", 9, margin, "The window holds no decisions.", 12)
	}
	if r.err != nil {
		return nil, r.err
	}
	var buf bytes.Buffer
	if _, err := pdf.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (r *report) newPage() {
	r.pdf.AddPage()
	r.page++
	r.y = margin
	if r.page > 1 {
		r.text("sans", 7, margin, "Clearance validation pack, continued", 14)
	}
}

// text writes one line at x and moves down by advance, starting a page when
// the line would not fit. Text wider than the page is cut with an ellipsis.
func (r *report) text(font string, size, x float64, s string, advance float64) {
	if r.err != nil {
		return
	}
	if r.y+advance > bottom {
		r.newPage()
	}
	r.put(font, size, x, pageW-margin-x, s)
	r.y += advance
}

// put draws s at (x, r.y) within width.
func (r *report) put(font string, size, x, width float64, s string) {
	if r.err != nil {
		return
	}
	if err := r.pdf.SetFont(font, "", size); err != nil {
		r.err = err
		return
	}
	s = r.fit(s, width)
	r.pdf.SetXY(x, r.y)
	if err := r.pdf.Cell(nil, s); err != nil {
		r.err = err
	}
}

// fit cuts s to width with an ellipsis.
func (r *report) fit(s string, width float64) string {
	w, err := r.pdf.MeasureTextWidth(s)
	if err != nil || w <= width {
		return s
	}
	runes := []rune(s)
	for n := len(runes) - 1; n > 0; n-- {
		c := string(runes[:n]) + "…"
		if w, err := r.pdf.MeasureTextWidth(c); err == nil && w <= width {
			return c
		}
	}
	return ""
}

func (r *report) pair(label, value string) {
	if r.y+13 > bottom {
		r.newPage()
	}
	r.put("sans", 9, margin, 85, label)
	r.put("sans", 9, margin+90, pageW-2*margin-90, value)
	r.y += 13
}

func (r *report) heading(s string) {
	r.gap(8)
	if r.y+40 > bottom {
		r.newPage()
	}
	r.text("sans", 12, margin, s, 17)
}

func (r *report) gap(d float64) { r.y += d }

// tableRow writes cells at the column offsets, each cut to its column.
func (r *report) tableRow(font string, size float64, cols []float64, cells []string) {
	if r.y+size+2.5 > bottom {
		r.newPage()
	}
	for i, c := range cells {
		end := pageW - margin
		if i+1 < len(cols) {
			end = cols[i+1] - 4
		}
		r.put(font, size, cols[i], end-cols[i], c)
	}
	r.y += size + 2.5
}
