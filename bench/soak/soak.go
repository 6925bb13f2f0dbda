package soak

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clearancehq/clearance/client"
)

// Defaults of Config.
const (
	DefaultInterval = time.Minute
	DefaultRate     = 200
	// DefaultConcurrency is the load tool's workers: enough that the rate
	// holds while latency climbs (8 workers at 200 operations/s leave 40 ms
	// each), idle otherwise.
	DefaultConcurrency  = 32
	DefaultCycleShare   = 0.2
	DefaultFeatureEvery = 2 * time.Second
	DefaultExportEvery  = 30 * time.Second
)

// Config is one soak run. Binary, Dir and Duration are required.
type Config struct {
	// Binary is the clearance binary to run (serve and loadtest).
	Binary string
	// Dir receives the outputs (created if missing).
	Dir string
	// DataDir is the server's --data; empty means Dir/data.
	DataDir string
	// Store is the server's --store: empty for embedded Pebble in DataDir,
	// or a postgres:// URL (a scratch database or schema: the run writes
	// to it).
	Store    string
	Duration time.Duration
	// Interval is the time between samples; 0 means DefaultInterval.
	Interval time.Duration
	// Rate, Concurrency and CycleShare are the load tool's --rate,
	// --concurrency and --cycle-share; 0 means the defaults above.
	Rate        float64
	Concurrency int
	CycleShare  float64
	// FeatureEvery and ExportEvery pace the feature rounds and the exports
	// (see doc.go); 0 means the defaults above.
	FeatureEvery, ExportEvery time.Duration
	// Rule judges the run; the zero Rule means DefaultRule, and a Rule with
	// only Warmup set means DefaultRule with that warm-up.
	Rule Rule
	// ServerArgs are more flags for `clearance serve`.
	ServerArgs []string
	// Log receives a line per sample and the harness's first failures; nil
	// means none.
	Log io.Writer
}

// Report is the outcome of a run.
type Report struct {
	Samples []Sample
	Verdict Verdict
	// Features counts the harness's operations by kind.
	Features map[string]Count
	// Callbacks is what the callback receiver took.
	Callbacks Callbacks
	// Load is the load tool's result (its JSON document, loadtest.json).
	Load LoadResult
	// ServerErrors counts the server's log lines at level ERROR.
	ServerErrors int64
	// CSV, PNG and Text are the paths written.
	CSV, PNG, Text string
}

// LoadResult is the part of `clearance loadtest --json` a soak reads.
type LoadResult struct {
	Operations   int64    `json:"operations"`
	Succeeded    int64    `json:"succeeded"`
	Failed       int64    `json:"failed"`
	OpsPerSecond float64  `json:"ops_per_second"`
	Requests     int64    `json:"requests"`
	Pass         bool     `json:"pass"`
	Failures     []string `json:"failures"`
	Latency      struct {
		P50US int64 `json:"p50_us"`
		P99US int64 `json:"p99_us"`
	} `json:"latency"`
	ShouldExecute *struct {
		True  int64 `json:"true"`
		False int64 `json:"false"`
	} `json:"should_execute"`
}

// Output file names in Config.Dir.
const (
	FileCSV      = "soak.csv"
	FilePNG      = "soak.png"
	FileVerdict  = "verdict.txt"
	FileLoadJSON = "loadtest.json"
	FileLoadLog  = "loadtest.log"
	FileServer   = "server.log"
)

// Limits of the run's phases.
const (
	startLimit     = 90 * time.Second // the server listening and healthy
	loadStopLimit  = 2 * time.Minute  // the load tool finishing after Duration
	callbackLimit  = time.Minute      // the last callbacks arriving
	serverStopWait = 60 * time.Second // SIGTERM to exit (its drain is 30 s)
	exportLimitMin = 2 * time.Minute  // an export being built
)

func (c *Config) defaults() error {
	if c.Binary == "" || c.Dir == "" {
		return errors.New("soak: Binary and Dir are required")
	}
	if c.Duration <= 0 {
		return errors.New("soak: Duration must be positive")
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Interval < 0 || c.Interval > c.Duration {
		return fmt.Errorf("soak: Interval %v must be positive and at most the duration %v", c.Interval, c.Duration)
	}
	if c.DataDir == "" {
		c.DataDir = filepath.Join(c.Dir, "data")
	}
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.CycleShare == 0 {
		c.CycleShare = DefaultCycleShare
	}
	if c.FeatureEvery == 0 {
		c.FeatureEvery = DefaultFeatureEvery
	}
	if c.ExportEvery == 0 {
		c.ExportEvery = DefaultExportEvery
	}
	if c.Rate < 0 || c.Concurrency < 0 || c.CycleShare < 0 || c.CycleShare > 1 || c.FeatureEvery < 0 || c.ExportEvery < 0 {
		return errors.New("soak: negative rate, concurrency or period, or a cycle share above 1")
	}
	if w := c.Rule.Warmup; c.Rule == (Rule{Warmup: w}) {
		c.Rule = DefaultRule
		c.Rule.Warmup = w
	}
	return nil
}

// Run runs one soak (see doc.go) and writes its outputs. An error means
// the run could not be carried out; a run that found a leak or errors
// returns a Report whose Verdict does not pass.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", a...)
		}
	}
	srv, err := startServer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer srv.kill()
	logf("soak: server pid %d at %s (data %s%s)", srv.pid, srv.url, cfg.DataDir, storeNote(cfg.Store))

	platformKey, err := readSecret(filepath.Join(cfg.DataDir, "platform.key"))
	if err != nil {
		return nil, err
	}
	platform, err := client.New(srv.url, platformKey)
	if err != nil {
		return nil, err
	}
	org, err := platform.CreateOrg(ctx, client.CreateOrgRequest{Name: "soak-" + time.Now().UTC().Format("20060102T150405Z")})
	if err != nil {
		return nil, fmt.Errorf("soak: create the org: %w", err)
	}
	orgID := org.OrgId.String()
	loadKey, err := platform.CreateAPIKey(ctx, orgID, client.CreateAPIKeyRequest{Scopes: []client.Scope{client.ScopeOrg}})
	if err != nil {
		return nil, fmt.Errorf("soak: create the load tool's key: %w", err)
	}
	// The harness's own calls are sent once: a 5xx is seen, not retried away.
	api, err := client.New(srv.url, org.ApiKey, client.WithRetries(0, 0))
	if err != nil {
		return nil, err
	}
	public, err := client.New(srv.url, "", client.WithRetries(0, 0))
	if err != nil {
		return nil, err
	}
	secret, err := randomHex(24)
	if err != nil {
		return nil, err
	}
	hooks, err := newReceiver(secret)
	if err != nil {
		return nil, err
	}
	defer hooks.close()
	_, err = api.ConnectWebhook(ctx, orgID, client.WebhookConnectRequest{
		Config: client.WebhookDestination{EndpointUrl: hooks.url, ProviderName: ptr("soak receiver"), WorkflowId: ptr(soakWorkflow)},
		Credentials: &struct {
			WebhookSecret *string `json:"webhook_secret,omitempty"`
		}{WebhookSecret: ptr("whsec-" + secret)},
	})
	if err != nil {
		return nil, fmt.Errorf("soak: connect the callback receiver: %w", err)
	}
	hooks.secret = []byte("whsec-" + secret)

	start := time.Now()
	load, err := startLoad(ctx, cfg, srv.url, loadKey.ApiKey)
	if err != nil {
		return nil, err
	}
	defer load.kill()

	f := &features{api: api, public: public, orgID: orgID, log: logf, counts: map[string]*Count{},
		rng: mrand.New(mrand.NewPCG(uint64(start.UnixNano()), 22)), lastTo: start.UTC().Truncate(time.Microsecond),
		evaluated: map[string]bool{}}
	// At the end the loops stop between operations, never cutting a request
	// short: the server counts a request its client abandoned as a 503.
	halt := make(chan struct{})
	var workers sync.WaitGroup
	workers.Go(func() { every(ctx, halt, cfg.FeatureEvery, true, f.round) })
	workers.Go(func() {
		every(ctx, halt, cfg.ExportEvery, false, func(ctx context.Context) { f.export(ctx, halt, max(exportLimitMin, cfg.ExportEvery)) })
	})

	rep := &Report{}
	// The harness stops just before the last sample, which so counts every
	// operation it finished.
	var once sync.Once
	stop := func() {
		once.Do(func() { close(halt) })
		workers.Wait()
	}
	samples, stopped := sampleFor(ctx, cfg, srv, platform, f, start, stop, logf)
	stop()
	rep.Samples = samples
	rep.Verdict = Judge(samples, cfg.Rule)
	if stopped != nil {
		rep.Verdict.Fail(stopped.Error())
	}

	// The load tool stops by itself a little after the last sample.
	logf("soak: sampling done; waiting for the load tool")
	res, lerr := load.wait(loadStopLimit)
	if lerr != nil {
		rep.Verdict.Fail("the load tool: " + lerr.Error())
	} else {
		rep.Load = res
		if !res.Pass {
			rep.Verdict.Fail(fmt.Sprintf("the load tool's run failed: %s", strings.Join(res.Failures, "; ")))
		}
		if res.Operations == 0 {
			rep.Verdict.Fail("the load tool measured no operation")
		}
	}

	// Every decision of the soak workflow is called back, at least once.
	logf("soak: load tool done (%v after the start); waiting for the callbacks", time.Since(start).Round(time.Millisecond))
	if missing := f.awaitCallbacks(ctx, hooks, callbackLimit); missing > 0 {
		rep.Verdict.Fail(fmt.Sprintf("%d decisions of workflow %q were not called back within %v", missing, soakWorkflow, callbackLimit))
	}
	rep.Callbacks = hooks.counts()
	if rep.Callbacks.Bad > 0 {
		rep.Verdict.Fail(fmt.Sprintf("%d callbacks had a bad signature or body", rep.Callbacks.Bad))
	}
	rep.Features = f.snapshot()
	for _, k := range []string{"evaluate", "proof_packet", "share_link", "checkpoint", "console_decisions"} {
		if rep.Features[k].OK == 0 {
			rep.Verdict.Fail("no " + k + " succeeded")
		}
	}

	logf("soak: stopping the server (%v after the start)", time.Since(start).Round(time.Millisecond))
	if code, err := srv.stop(serverStopWait); err != nil || code != 0 {
		rep.Verdict.Fail(fmt.Sprintf("the server did not stop cleanly on SIGTERM (exit %d, %v)", code, err))
	}
	rep.ServerErrors = srv.errorLines()
	logf("soak: server stopped (%v after the start)", time.Since(start).Round(time.Millisecond))
	if err := rep.write(cfg); err != nil {
		return rep, err
	}
	return rep, nil
}

func storeNote(store string) string {
	if store == "" {
		return ", embedded Pebble"
	}
	return ", PostgreSQL"
}

// sampleFor takes a sample at the start and every Interval until Duration
// has passed, calling beforeLast before the last; it stops early, saying
// why, when the server exits or the context ends.
func sampleFor(ctx context.Context, cfg Config, srv *server, platform *client.Client, f *features, start time.Time,
	beforeLast func(), logf func(string, ...any)) ([]Sample, error) {
	var samples []Sample
	var prev scrape
	take := func() error {
		s, sc, err := takeSample(ctx, srv, platform, start)
		if err != nil {
			return err
		}
		if len(samples) > 0 {
			cum, total := sc.since(prev)
			s.Requests = sc.requests - prev.requests
			s.Errors5xx = sc.errors5xx - prev.errors5xx
			s.P50 = seconds(quantile(0.50, sc.bounds, cum, total))
			s.P99 = seconds(quantile(0.99, sc.bounds, cum, total))
		}
		s.Ops, s.Failures = f.ops.Swap(0), f.failures.Swap(0)
		prev = sc
		samples = append(samples, s)
		rate := 0.0
		if n := len(samples); n > 1 {
			rate = s.Rate(samples[n-2])
		}
		logf("soak: %6.0fs  rss %7.1f MiB  heap %6.1f MiB  go %6.1f MiB  store caches %6.1f MiB  goroutines %5d  fds %4d (sst %d)  req/s %7.1f  p50 %7.2f ms  p99 %8.2f ms  5xx %d  failed %d",
			s.Elapsed.Seconds(), float64(s.RSS)/(1<<20), float64(s.HeapInuse)/(1<<20), float64(s.GoSys)/(1<<20), float64(s.StoreCache)/(1<<20), s.Goroutines, s.FDs, s.TableFDs, rate,
			ms(s.P50), ms(s.P99), s.Errors5xx, s.Failures)
		return nil
	}
	if err := take(); err != nil {
		return samples, err
	}
	n := int(cfg.Duration / cfg.Interval)
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	for i := range n {
		select {
		case <-ctx.Done():
			return samples, ctx.Err()
		case <-srv.done:
			return samples, fmt.Errorf("the server exited during the run: %v", srv.waitErr)
		case <-tick.C:
		}
		if i == n-1 {
			beforeLast()
		}
		if err := take(); err != nil {
			return samples, err
		}
	}
	return samples, nil
}

func takeSample(ctx context.Context, srv *server, platform *client.Client, start time.Time) (Sample, scrape, error) {
	at := time.Now()
	rss, fds, tables, err := readProc(srv.pid)
	if err != nil {
		return Sample{}, scrape{}, fmt.Errorf("read /proc of the server: %w", err)
	}
	text, err := platform.Metrics(ctx)
	if err != nil {
		return Sample{}, scrape{}, fmt.Errorf("scrape /metrics: %w", err)
	}
	sc, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		return Sample{}, scrape{}, err
	}
	// Milliseconds are what the CSV keeps.
	s := Sample{Elapsed: at.Sub(start).Round(time.Millisecond), At: at, RSS: rss, HeapInuse: sc.heapInuse, GoSys: sc.goSys, StoreCache: sc.storeCache,
		Goroutines: sc.goroutines, FDs: fds, TableFDs: tables, P50: -1, P99: -1}
	return s, sc, nil
}

// seconds is a latency in seconds as a Duration rounded to the microsecond
// (the CSV's precision); -1 for NaN.
func seconds(x float64) time.Duration {
	if x != x {
		return -1
	}
	return time.Duration(x * float64(time.Second)).Round(time.Microsecond)
}

func ms(d time.Duration) float64 {
	if d < 0 {
		return 0
	}
	return float64(d) / float64(time.Millisecond)
}

// every calls fn every period until ctx ends or halt is closed, the first
// time at once when now is set, otherwise after a period.
func every(ctx context.Context, halt <-chan struct{}, period time.Duration, now bool, fn func(context.Context)) {
	t := time.NewTicker(period)
	defer t.Stop()
	if now {
		fn(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-halt:
			return
		case <-t.C:
		}
		fn(ctx)
	}
}

// awaitCallbacks waits until the receiver has a callback of every decision
// the harness made (within limit) and returns how many are missing.
func (f *features) awaitCallbacks(ctx context.Context, r *receiver, limit time.Duration) int {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		missing := 0
		r.mu.Lock()
		f.mu.Lock()
		for id := range f.evaluated {
			if !r.decisions[id] {
				missing++
			}
		}
		f.mu.Unlock()
		r.mu.Unlock()
		if missing == 0 || time.Now().After(deadline) {
			return missing
		}
		select {
		case <-ctx.Done():
			return missing
		case <-tick.C:
		}
	}
}

func (rep *Report) write(cfg Config) error {
	rep.CSV = filepath.Join(cfg.Dir, FileCSV)
	rep.PNG = filepath.Join(cfg.Dir, FilePNG)
	rep.Text = filepath.Join(cfg.Dir, FileVerdict)
	var csvBuf, png bytes.Buffer
	if err := WriteCSV(&csvBuf, rep.Samples); err != nil {
		return err
	}
	if err := os.WriteFile(rep.CSV, csvBuf.Bytes(), 0o644); err != nil {
		return err
	}
	if err := Plot(&png, rep.Samples, rep.Verdict); err != nil {
		return err
	}
	if err := os.WriteFile(rep.PNG, png.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(rep.Text, []byte(rep.Summary(cfg)), 0o644)
}

// Summary is verdict.txt: the run's settings, the load tool's and the
// harness's counts, and the verdict.
func (rep *Report) Summary(cfg Config) string {
	var b strings.Builder
	store := "embedded Pebble"
	if cfg.Store != "" {
		store = "PostgreSQL"
	}
	fmt.Fprintf(&b, "soak of %v, a sample every %v, %s\n", cfg.Duration, cfg.Interval, store)
	l := rep.Load
	fmt.Fprintf(&b, "load tool (mixed, cycle share %.2f, %d workers, rate %.0f/s): %d operations, %d failed, %.1f ops/s, p50 %.2f ms, p99 %.2f ms",
		cfg.CycleShare, cfg.Concurrency, cfg.Rate, l.Operations, l.Failed, l.OpsPerSecond, float64(l.Latency.P50US)/1e3, float64(l.Latency.P99US)/1e3)
	if l.ShouldExecute != nil {
		fmt.Fprintf(&b, ", should_execute true %d false %d", l.ShouldExecute.True, l.ShouldExecute.False)
	}
	b.WriteString("\nharness operations (ok / failed):\n")
	for _, k := range kinds(rep.Features) {
		c := rep.Features[k]
		fmt.Fprintf(&b, "  %-22s %7d / %d", k, c.OK, c.Failed)
		if c.LastError != "" {
			fmt.Fprintf(&b, "  last: %s", c.LastError)
		}
		b.WriteString("\n")
	}
	cb := rep.Callbacks
	fmt.Fprintf(&b, "callbacks: %d delivered, %d decisions, %d bad\n", cb.Delivered, cb.Decisions, cb.Bad)
	fmt.Fprintf(&b, "server log lines at level ERROR: %d\n", rep.ServerErrors)
	var requests int64
	for _, s := range rep.Samples {
		requests += s.Requests
	}
	fmt.Fprintf(&b, "requests answered: %d\n", requests)
	b.WriteString(rep.Verdict.String())
	return b.String()
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// readSecret reads a one-line secret file the server wrote.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("soak: read the platform key: %w", err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("soak: %s is empty", path)
	}
	return s, nil
}

// server is the running `clearance serve`.
type server struct {
	cmd     *exec.Cmd
	pid     int
	url     string
	log     *os.File
	done    chan struct{} // closed when the process has exited
	waitErr error

	mu     sync.Mutex
	errors int64
}

func startServer(ctx context.Context, cfg Config) (*server, error) {
	logFile, err := os.OpenFile(filepath.Join(cfg.Dir, FileServer), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--data", cfg.DataDir, "--addr", "127.0.0.1:0", "--access-log=false",
		// The callback receiver is on loopback.
		"--allow-private-destinations"}
	if cfg.Store != "" {
		args = append(args, "--store", cfg.Store)
	}
	args = append(args, cfg.ServerArgs...)
	s := &server{cmd: exec.Command(cfg.Binary, args...), log: logFile, done: make(chan struct{})}
	s.cmd.Stderr = logFile
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("soak: start %s: %w", cfg.Binary, err)
	}
	s.pid = s.cmd.Process.Pid
	listening := make(chan string, 1)
	go func() {
		// Drain stdout for the life of the process (a full pipe would
		// block its logging) into the log file, watching for the address.
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = logFile.Write(append(line, '\n'))
			var m struct{ Msg, Level, Addr string }
			if json.Unmarshal(line, &m) != nil {
				continue
			}
			if m.Level == "ERROR" {
				s.mu.Lock()
				s.errors++
				s.mu.Unlock()
			}
			if m.Msg == "listening" && m.Addr != "" {
				select {
				case listening <- m.Addr:
				default:
				}
			}
		}
		_, _ = io.Copy(logFile, stdout)
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	fail := func(err error) (*server, error) {
		s.kill()
		return nil, err
	}
	select {
	case addr := <-listening:
		s.url = "http://" + addr
	case <-s.done:
		return fail(fmt.Errorf("soak: the server exited before listening (%v); see %s", s.waitErr, logFile.Name()))
	case <-time.After(startLimit):
		return fail(fmt.Errorf("soak: the server did not listen within %v", startLimit))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	c, err := client.New(s.url, "")
	if err != nil {
		return fail(err)
	}
	hctx, cancel := context.WithTimeout(ctx, startLimit)
	defer cancel()
	if _, err := c.Health(hctx); err != nil {
		return fail(fmt.Errorf("soak: the server is not healthy: %w", err))
	}
	return s, nil
}

func (s *server) errorLines() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errors
}

// stop sends SIGTERM and waits for the exit code.
func (s *server) stop(limit time.Duration) (int, error) {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return -1, err
	}
	select {
	case <-s.done:
	case <-time.After(limit):
		s.kill()
		return -1, fmt.Errorf("no exit within %v", limit)
	}
	return s.cmd.ProcessState.ExitCode(), nil
}

// kill ends the process if it still runs and waits for it.
func (s *server) kill() {
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	_ = s.log.Close()
}

// loadProc is the running `clearance loadtest`.
type loadProc struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	dir    string
	done   chan struct{}
	err    error
	logOut *os.File
}

func startLoad(ctx context.Context, cfg Config, url, key string) (*loadProc, error) {
	logFile, err := os.Create(filepath.Join(cfg.Dir, FileLoadLog))
	if err != nil {
		return nil, err
	}
	// The load outlasts the last sample by a little, so that the sample
	// sees it running; the tool then stops by itself, never cutting a
	// request short.
	grace := min(max(cfg.Interval, 5*time.Second), 30*time.Second)
	args := []string{"loadtest", "--target", url, "--key", key, "--scenario", "mixed",
		"--cycle-share", strconv.FormatFloat(cfg.CycleShare, 'g', -1, 64),
		"--concurrency", strconv.Itoa(cfg.Concurrency), "--rate", strconv.FormatFloat(cfg.Rate, 'g', -1, 64),
		"--duration", (cfg.Duration + grace).String(), "--warmup", "0s", "--quiet", "--json"}
	l := &loadProc{cmd: exec.CommandContext(ctx, cfg.Binary, args...), dir: cfg.Dir, done: make(chan struct{}), logOut: logFile}
	l.cmd.Stdout, l.cmd.Stderr = &l.out, logFile
	if err := l.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("soak: start the load tool: %w", err)
	}
	go func() {
		l.err = l.cmd.Wait()
		close(l.done)
	}()
	return l, nil
}

// wait waits (at most limit) for the load tool to finish and reads its
// result, which it also keeps as loadtest.json.
func (l *loadProc) wait(limit time.Duration) (LoadResult, error) {
	select {
	case <-l.done:
	case <-time.After(limit):
		l.kill()
		return LoadResult{}, fmt.Errorf("did not finish within %v of the run's end", limit)
	}
	_ = l.logOut.Close()
	var res LoadResult
	if l.out.Len() == 0 {
		return res, fmt.Errorf("no result (%v); see %s", l.err, filepath.Join(l.dir, FileLoadLog))
	}
	if err := os.WriteFile(filepath.Join(l.dir, FileLoadJSON), l.out.Bytes(), 0o644); err != nil {
		return res, err
	}
	if err := json.Unmarshal(l.out.Bytes(), &res); err != nil {
		return res, fmt.Errorf("undecodable result: %w", err)
	}
	return res, nil
}

func (l *loadProc) kill() {
	select {
	case <-l.done:
	default:
		_ = l.cmd.Process.Kill()
		<-l.done
	}
	_ = l.logOut.Close() // a second Close only returns an error
}
