package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
	"github.com/clearancehq/clearance/cmd/clearance/internal/load"
	"github.com/clearancehq/clearance/server"
)

const loadtestUsage = `usage: clearance loadtest [flags]

Drives a Clearance server over HTTP and reports throughput, latency
percentiles and errors. Scenarios: evaluate (evaluate-decision), cycle
(enforce-and-bind → claim → finalize with signed intents), mixed.

  clearance loadtest --self --scenario cycle --duration 10s   # one-command benchmark
  clearance loadtest --target http://127.0.0.1:8080 --platform-key "$(cat clearance-data/platform.key)"

For cycle and mixed the tool publishes an ENFORCEMENT bundle in the org it
uses: with --key, never point it at an org whose policy matters. Exit code 1
when a request got a 5xx or failed in transport, or a cycle was not executed.

--peer opa loads an OPA server holding the starter policy in Rego
(bench/peers/starter.rego) with the same evaluate inputs, for comparisons:
it checks GET /health, POSTs {"input": …} to /v1/data/<--opa-path> and
counts an answer as an error (and fails the run) unless its result is the
decision Clearance's starter policy gives. Evaluate only, no credentials;
the target defaults to OPA's http://127.0.0.1:8181.

  opa run --server --addr 127.0.0.1:8181 bench/peers/starter.rego &
  clearance loadtest --peer opa --scenario evaluate --concurrency 64 --duration 20s --json

flags:
`

func loadtest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, loadtestUsage)
		fs.PrintDefaults()
	}
	scenario := fs.String("scenario", "evaluate", "evaluate, cycle or mixed")
	target := fs.String("target", env("CLEARANCE_SERVER", "http://127.0.0.1:8080"), "server base URL (env CLEARANCE_SERVER)")
	// Secrets from the environment are read after parsing, so -h never prints them.
	key := fs.String("key", "", "org API key (env CLEARANCE_API_KEY)")
	platformKey := fs.String("platform-key", "", "platform key: the tool creates a fresh org (env CLEARANCE_PLATFORM_KEY)")
	self := fs.Bool("self", false, "start an in-process server on a temporary data dir and load it")
	allowRemote := fs.Bool("allow-remote", false, "allow a target that is not localhost or a loopback address")
	concurrency := fs.Int("concurrency", 16, "concurrent workers")
	duration := fs.Duration("duration", 10*time.Second, "measured time after the warmup; none when only --count is given")
	count := fs.Int64("count", 0, "stop after this many measured operations (0: no limit)")
	warmup := fs.Duration("warmup", time.Second, "warmup whose operations are not measured; 0 when only --count is given")
	orgs := fs.Int("orgs", 1, "create this many orgs and spread the workers over them (needs a platform key or --self)")
	prefill := fs.Int64("prefill", 0, "record this many decisions before the warmup, unmeasured, to measure a store of that size")
	pace := fs.Float64("rate", 0, "start at most this many operations per second, all workers together (0: as fast as the workers go)")
	cycleShare := fs.Float64("cycle-share", load.DefaultCycleShare, "share of cycles among operations (mixed only)")
	timeout := fs.Duration("timeout", load.DefaultTimeout, "per-request timeout")
	asJSON := fs.Bool("json", false, "print one JSON document instead of the table")
	quiet := fs.Bool("quiet", false, "no progress line on stderr")
	peer := fs.String("peer", "", "load a peer policy server instead of Clearance: opa (evaluate only)")
	opaPath := fs.String("opa-path", load.DefaultOPAPath, "data path of the starter policy's decision on the OPA server (--peer opa)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "clearance loadtest: "+format+"\n", a...)
		return 2
	}
	if *key == "" {
		*key = os.Getenv("CLEARANCE_API_KEY")
	}
	if *platformKey == "" {
		*platformKey = os.Getenv("CLEARANCE_PLATFORM_KEY")
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if set["count"] && !set["duration"] {
		*duration = 0
	}
	if set["count"] && !set["warmup"] {
		*warmup = 0
	}
	if set["cycle-share"] && *scenario != string(load.Mixed) {
		return usageErr("--cycle-share applies to --scenario mixed only")
	}
	if *self && (set["target"] || set["key"] || set["platform-key"] || set["allow-remote"]) {
		return usageErr("--self starts its own server: it takes no --target, --key, --platform-key or --allow-remote")
	}
	if set["opa-path"] && *peer != string(load.PeerOPA) {
		return usageErr("--opa-path applies to --peer opa only")
	}
	if *peer != "" {
		if *self || set["key"] || set["platform-key"] {
			return usageErr("--peer loads a peer server: it takes no --self, --key or --platform-key")
		}
		*key, *platformKey = "", "" // from the environment: Clearance's, not the peer's
		if !set["target"] && *peer == string(load.PeerOPA) {
			*target = "http://127.0.0.1:8181"
		}
	} else {
		*opaPath = ""
	}
	cfg := load.Config{Scenario: load.Scenario(*scenario), Target: *target, AllowRemote: *allowRemote, APIKey: *key,
		PlatformKey: *platformKey, CycleShare: *cycleShare, Concurrency: *concurrency, Duration: *duration, Count: *count,
		Warmup: *warmup, Orgs: *orgs, Prefill: *prefill, Rate: *pace, Timeout: *timeout, SelfHosted: *self, Peer: load.Peer(*peer), OPAPath: *opaPath}
	if *self {
		cfg.Target, cfg.APIKey, cfg.PlatformKey = "http://127.0.0.1:1", "", "placeholder" // replaced below
	}
	if err := cfg.Validate(); err != nil {
		return usageErr("%v", err)
	}
	if !*quiet {
		cfg.Progress = stderr
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *self {
		srv, err := startSelf(ctx, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "clearance loadtest: --self: %v\n", err)
			return 1
		}
		defer func() {
			if err := srv.close(); err != nil {
				fmt.Fprintf(stderr, "clearance loadtest: --self: %v\n", err)
			}
		}()
		cfg.Target, cfg.PlatformKey = srv.url, srv.platformKey
		if !*quiet {
			fmt.Fprintf(stderr, "loadtest: started a server at %s (data %s)\n", srv.url, srv.dir)
		}
	}

	res, err := load.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "clearance loadtest: %v\n", err)
		return 1
	}
	if *asJSON {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "clearance loadtest: %v\n", err)
		return 1
	}
	if !res.Pass {
		return 1
	}
	return 0
}

// selfServer is the server --self runs: runServer, as `clearance serve`
// runs it, on a temporary data dir, 127.0.0.1:0, rate limiting off.
type selfServer struct {
	url, platformKey, dir string
	cancel                context.CancelFunc
	done                  chan error
}

func startSelf(ctx context.Context, stderr io.Writer) (*selfServer, error) {
	dir, err := os.MkdirTemp("", "clearance-loadtest-")
	if err != nil {
		return nil, err
	}
	addrs := make(chan string, 1)
	log := slog.New(&listenHook{inner: slog.NewTextHandler(stderr, nil), addr: addrs})
	sctx, cancel := context.WithCancel(ctx)
	s := &selfServer{dir: dir, cancel: cancel, done: make(chan error, 1)}
	go func() {
		s.done <- runServer(sctx, log, serveConfig{data: dir, addr: "127.0.0.1:0", rateLimit: -1,
			rateBurst: server.DefaultRateBurst, maxBody: server.DefaultMaxBodyBytes,
			grantTTL: clearance.DefaultGrantTTL, claimLease: clearance.DefaultClaimLease})
	}()
	fail := func(err error) (*selfServer, error) {
		if cerr := s.close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	select {
	case addr := <-addrs:
		s.url = "http://" + addr
	case err := <-s.done:
		s.done <- err // close reads it again
		if err == nil {
			err = errors.New("the server stopped before listening")
		}
		return fail(err)
	case <-time.After(30 * time.Second):
		return fail(errors.New("the server did not start listening within 30s"))
	}
	key, err := keyfile.ReadSecret(filepath.Join(dir, platformKeyFile))
	if err != nil {
		return fail(fmt.Errorf("read the platform key: %w", err))
	}
	s.platformKey = key
	return s, nil
}

// close stops the server, waits for it (at most 40s: its drain is 30s) and
// removes the data dir.
func (s *selfServer) close() error {
	s.cancel()
	var err error
	select {
	case err = <-s.done:
	case <-time.After(40 * time.Second):
		err = errors.New("the server did not stop within 40s")
	}
	if rerr := os.RemoveAll(s.dir); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}

// listenHook passes the server's errors on and catches the address of its
// "listening" line; everything else is dropped.
type listenHook struct {
	inner slog.Handler
	addr  chan<- string
	attrs []slog.Attr
}

func (h *listenHook) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *listenHook) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "listening" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key != "addr" {
				return true
			}
			select {
			case h.addr <- a.Value.String():
			default:
			}
			return false
		})
	}
	if r.Level < slog.LevelError {
		return nil
	}
	if len(h.attrs) > 0 {
		r = r.Clone()
		r.AddAttrs(h.attrs...)
	}
	return h.inner.Handle(ctx, r)
}

func (h *listenHook) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *listenHook) WithGroup(string) slog.Handler { return h }
