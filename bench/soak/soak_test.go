package soak_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/bench/soak"
	"github.com/clearancehq/clearance/store/pgstore/pgtest"
)

// The short soak's length and sampling; CLEARANCE_SOAK_DURATION and
// CLEARANCE_SOAK_INTERVAL make it longer (scripts/soak.sh runs the hour).
const (
	shortDuration = 24 * time.Second
	shortInterval = 2 * time.Second
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary is CLEARANCE_BIN, or clearance built once from this repository.
func binary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CLEARANCE_BIN"); p != "" {
		return p
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot build clearance")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "clearance-soak-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "clearance")
		cmd := exec.Command(gobin, "build", "-o", binPath, "./cmd/clearance")
		cmd.Dir = filepath.Join("..", "..") // the root module, whose go.sum builds it
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}

// TestShortSoak runs the real server under the mixed load for a short
// while (on embedded Pebble) and checks what a soak records: a sample per
// interval with every series filled, the CSV that reads back to the same
// samples and verdict, the PNG, and a run without 5xx or failed
// operations. A run this short says nothing about leaks, so whether it is
// flat is not asserted; the verdict's rule is tested on synthetic series.
func TestShortSoak(t *testing.T) {
	shortSoak(t, "")
}

// TestShortSoakPostgres is TestShortSoak on PostgreSQL (a fresh schema).
func TestShortSoakPostgres(t *testing.T) {
	schema := pgtest.NewSchema(t, "clearance_soak_")
	shortSoak(t, pgtest.SchemaURL(t, schema))
}

func shortSoak(t *testing.T, store string) {
	if runtime.GOOS != "linux" {
		t.Skip("the soak reads /proc")
	}
	cfg := soak.Config{
		Binary: binary(t), Dir: t.TempDir(), Store: store,
		Duration: envDuration(t, "CLEARANCE_SOAK_DURATION", shortDuration),
		Interval: envDuration(t, "CLEARANCE_SOAK_INTERVAL", shortInterval),
		Rate:     40, Concurrency: 4, FeatureEvery: time.Second, ExportEvery: 5 * time.Second,
	}
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+5*time.Minute)
	defer cancel()
	rep, err := soak.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("progress:\n%s\n%s", log.String(), mustRead(t, rep.Text))

	// Only growth may keep a short run from passing: no 5xx, no failed
	// operation, the load tool's run passed, every callback arrived, the
	// server stopped cleanly.
	v := rep.Verdict
	if v.Errors5xx != 0 || v.Failures != 0 {
		t.Errorf("5xx %d, failures %d", v.Errors5xx, v.Failures)
	}
	for _, r := range v.Reasons {
		if !strings.Contains(r, " grew: ") {
			t.Errorf("reason: %s", r)
		}
	}
	if !rep.Load.Pass || rep.Load.Operations == 0 || rep.Load.Failed != 0 || rep.Load.ShouldExecute == nil ||
		rep.Load.ShouldExecute.True == 0 || rep.Load.ShouldExecute.False != 0 {
		t.Errorf("load tool: %+v", rep.Load)
	}
	for _, kind := range []string{"evaluate", "console_decisions", "console_activity", "console_escalations", "checkpoint",
		"consistency_proof", "inclusion_proof", "proof_packet", "share_link", "shared_verify", "shared_proof_bundle",
		"dry_run", "revoke_share_links", "revoked_link_refused", "export"} {
		if c := rep.Features[kind]; c.OK == 0 || c.Failed != 0 {
			t.Errorf("%s: %+v", kind, c)
		}
	}
	// A decision whose answer the run's end cut short may be called back too.
	if cb := rep.Callbacks; cb.Bad != 0 || cb.Decisions < rep.Features["evaluate"].OK {
		t.Errorf("callbacks %+v for %d decisions", cb, rep.Features["evaluate"].OK)
	}

	// A sample at the start and one per interval, each filled.
	s := rep.Samples
	if want := int(cfg.Duration/cfg.Interval) + 1; len(s) != want {
		t.Fatalf("%d samples, want %d", len(s), want)
	}
	var ops int64
	for i, x := range s {
		ops += x.Ops
		if x.RSS < 1<<20 || x.HeapInuse < 1<<20 || x.GoSys < x.HeapInuse || x.Goroutines < 5 || x.FDs < 5 ||
			x.TableFDs < 0 || x.TableFDs > x.FDs || (store != "" && x.TableFDs != 0) ||
			(store == "") != (x.StoreCache > 0) || x.StoreCache > x.RSS {
			t.Errorf("sample %d: %+v", i, x)
		}
		if i == 0 {
			continue
		}
		// A tick that a slow scrape delayed comes late, the next one soon
		// after: the samples keep to the schedule, not to equal spacing.
		if x.Elapsed <= s[i-1].Elapsed {
			t.Errorf("sample %d: %v, after %v", i, x.Elapsed, s[i-1].Elapsed)
		}
		if x.Requests == 0 || x.P50 < 0 || x.P99 < x.P50 || x.P99 > 10*time.Second {
			t.Errorf("sample %d: %d requests, p50 %v, p99 %v", i, x.Requests, x.P50, x.P99)
		}
	}
	if last := s[len(s)-1].Elapsed; last < cfg.Duration || last > cfg.Duration+2*cfg.Interval+10*time.Second {
		t.Errorf("the last sample at %v of a %v run", last, cfg.Duration)
	}
	var counted int64
	for _, c := range rep.Features {
		counted += c.OK + c.Failed
	}
	if ops != counted {
		t.Errorf("the samples count %d harness operations, the report %d", ops, counted)
	}

	// The CSV reads back to the samples and to the same verdict.
	f, err := os.Open(rep.CSV)
	if err != nil {
		t.Fatal(err)
	}
	back, err := soak.ReadCSV(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(s) {
		t.Fatalf("%d rows, %d samples", len(back), len(s))
	}
	for i := range s {
		a, b := s[i], back[i]
		if !a.At.Equal(b.At) {
			t.Errorf("row %d: %v, want %v", i, b.At, a.At)
		}
		a.At, b.At = time.Time{}, time.Time{}
		if a != b {
			t.Errorf("row %d: %+v, want %+v", i, b, a)
		}
	}
	again := soak.Judge(back, soak.DefaultRule) // what the run judged with
	if fmt.Sprint(again.Checks) != fmt.Sprint(v.Checks) || again.Flat != v.Flat {
		t.Errorf("judged from the CSV: %s\nfrom the run: %s", again, v)
	}

	// The PNG decodes, at its documented size.
	pf, err := os.Open(rep.PNG)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(pf)
	pf.Close()
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != soak.PlotWidth || b.Dy() != soak.PlotHeight {
		t.Fatalf("PNG %v", b)
	}
	for _, name := range []string{soak.FileLoadJSON, soak.FileServer, soak.FileLoadLog} {
		if _, err := os.Stat(filepath.Join(cfg.Dir, name)); err != nil {
			t.Error(err)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
