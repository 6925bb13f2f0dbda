package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	neturl "net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/store/pgstore"
	"github.com/clearancehq/clearance/webhook"
)

// versionString names the release, the module version and the commit the
// binary was built from (as the Go toolchain stamps them), e.g.
// "clearance 0.1.0 (interface 0.5.0; module (devel); commit 1f0405a, modified; go1.26.8)".
func versionString() string {
	parts := []string{"interface " + clearance.InterfaceVersion}
	if bi, ok := debug.ReadBuildInfo(); ok {
		parts = append(parts, "module "+bi.Main.Version)
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			c := "commit " + rev[:min(len(rev), 12)]
			if modified == "true" {
				c += ", modified"
			}
			parts = append(parts, c)
		}
		parts = append(parts, bi.GoVersion)
	}
	return "clearance " + clearance.Version + " (" + strings.Join(parts, "; ") + ")"
}

// env returns the environment value of name, or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// defaultGCPercent is serve's garbage-collection target when GOGC is not
// set. The server's Go heap is small (built with cgo, the store's
// memtables and block cache live outside it; without cgo, memoryLimit
// caps it), so at Go's default of 100 it was collected many times a
// second under load; at 200, CPU per decision fell by 9 to 12% for
// about 20 MB more peak memory, and 400 bought nothing more
// (docs/performance.md). GOGC, when set, wins.
const defaultGCPercent = 200

// gcPercent returns the GC percent serve sets, and false when the
// environment sets GOGC itself.
func gcPercent(getenv func(string) string) (int, bool) {
	if getenv("GOGC") != "" {
		return 0, false
	}
	return defaultGCPercent, true
}

// storeCacheHeadroom is what serve lets the Go heap hold beyond embedded
// Pebble's caches when those are on the Go heap (memoryLimit).
const storeCacheHeadroom = 256 << 20

// memoryLimit returns the soft memory limit serve sets, and false when it
// sets none. Built without cgo (the container image is), Pebble takes its
// block cache and memtables from the Go heap and frees them to the
// garbage collector: at GOGC=200 the heap then grew to three times those
// 256 MiB (over 1 GiB resident in a soak; 515–535 MiB for an hour with
// the limit). A limit of the caches plus a headroom makes the collector run
// before that. GOMEMLIMIT, when set, wins; PostgreSQL has no such caches.
func memoryLimit(getenv func(string) string, embedded, cachesOnGoHeap bool) (int64, bool) {
	if getenv("GOMEMLIMIT") != "" || !embedded || !cachesOnGoHeap {
		return 0, false
	}
	return pebblestore.DefaultCacheLimit + storeCacheHeadroom, true
}

// mallocTrimInterval is how often serve returns malloc's free pages to the
// system (malloc_glibc.go): at the soak's load about 5 MiB gather in 30 s.
const mallocTrimInterval = 30 * time.Second

// defaultMailFrom is the sender of the mail a server sends without --mail-from.
const defaultMailFrom = "clearance@localhost"

// platformKeyFile is where serve keeps the platform key inside the data dir.
const platformKeyFile = "platform.key"

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", env("CLEARANCE_DATA", "clearance-data"), "data directory (env CLEARANCE_DATA)")
	addr := fs.String("addr", env("CLEARANCE_ADDR", "127.0.0.1:8080"), "listen address (env CLEARANCE_ADDR)")
	metricsAddr := fs.String("metrics-addr", env("CLEARANCE_METRICS_ADDR", ""), "listen address of an unauthenticated Prometheus /metrics listener, e.g. 127.0.0.1:9464; empty means none (on --addr, /metrics needs the platform key) (env CLEARANCE_METRICS_ADDR)")
	storeURL := fs.String("store", env("CLEARANCE_STORE", ""), "storage backend; empty means embedded Pebble in the data directory (env CLEARANCE_STORE)")
	storeTimeout := fs.Duration("store-timeout", pgstore.DefaultTimeout, "PostgreSQL only: the bound on each database call of a request: each write transaction (its wait for the org's turn and a connection, its statements and COMMIT; a COMMIT it cuts off gets up to min(this, 2s) more to be settled), each read statement and health ping, and each connection attempt unless the URL sets connect_timeout; past it the request answers 503 STORE_UNAVAILABLE; 0 means the default, negative means no bound")
	rateLimit := fs.Float64("rate-limit", server.DefaultRateLimit, "requests per second per credential; negative disables")
	rateBurst := fs.Int("rate-burst", server.DefaultRateBurst, "rate-limit burst per credential")
	authRateLimit := fs.Float64("auth-rate-limit", server.DefaultAuthRateLimit, "requests per minute per client address (an IPv6 /64) on the public sign-up and sign-in routes, burst twice that; the automation connector's authorize and token endpoints get 6 times it; not changed by --rate-limit; 0 means the default, negative disables every public-auth budget (tests only)")
	authGlobalRateLimit := fs.Float64("auth-rate-limit-global", server.DefaultAuthGlobalRateLimit, "requests per minute on the public sign-up and sign-in routes from all client addresses together, per process, burst twice that (6 times it for the automation endpoints); 0 means the default, negative means no global budget")
	maxBody := fs.Int64("max-body", server.DefaultMaxBodyBytes, "maximum request body in bytes")
	logLevel := fs.String("log-level", env("CLEARANCE_LOG_LEVEL", "info"), "log level: debug, info, warn, error (env CLEARANCE_LOG_LEVEL)")
	ledgerKeyFile := fs.String("ledger-key-file", env("CLEARANCE_LEDGER_KEY_FILE", ""), "ledger checkpoint signing key file (PEM PKCS#8 Ed25519 or JSON); empty means the ledger key in the data directory (env CLEARANCE_LEDGER_KEY_FILE)")
	reportingKeyFile := fs.String("reporting-key-file", env("CLEARANCE_REPORTING_KEY_FILE", ""), "growth-report signing key file (PEM PKCS#8 Ed25519 or JSON, e.g. from clearance keys init --reporting-key-file); empty means none: the platform's monthly reports answer 503 (env CLEARANCE_REPORTING_KEY_FILE)")
	grantKeyFile := fs.String("grant-key-file", env("CLEARANCE_GRANT_KEY_FILE", ""), "grant signing key file (JSON ring or PEM PKCS#8 Ed25519); empty means the key ring in the data directory (env CLEARANCE_GRANT_KEY_FILE)")
	keyReload := fs.Duration("key-reload-interval", defaultKeyReloadInterval, "how often the grant key file is checked for a rotation or revocation; 0 means only on SIGHUP")
	grantTTL := fs.Duration("grant-ttl", clearance.DefaultGrantTTL, "execution grant lifetime")
	claimLease := fs.Duration("claim-lease", clearance.DefaultClaimLease, "claim lease")
	intentMaxAge := fs.Duration("intent-max-age", clearance.DefaultIntentMaxAge, "oldest issued_at of a signed intent that enforce-and-bind accepts")
	maxClockSkew := fs.Duration("max-clock-skew", clearance.DefaultMaxClockSkew, "how far ahead of the server's clock a signed intent's issued_at or a grant token's iat may be, and how far the server's clock may be off the store's when it issues a grant")
	maxJSONMembers := fs.Int("max-json-members", clearance.DefaultMaxJSONMembers, "most members of one JSON object in a request (bodies, signed intents)")
	maxJSONElements := fs.Int("max-json-elements", clearance.DefaultMaxJSONElements, "most elements of one JSON array in a request")
	shareFile := fs.String("share-secret-file", env("CLEARANCE_SHARE_SECRET_FILE", ""), "dossier share-link secret file (0600, at least 32 characters); empty means "+shareSecretFile+" in the data directory, created on first start (env CLEARANCE_SHARE_SECRET_FILE)")
	exportFile := fs.String("export-secret-file", env("CLEARANCE_EXPORT_SECRET_FILE", ""), "validation-pack HMAC secret file (0600); empty means "+exportSecretFile+" in the data directory, created on first start (env CLEARANCE_EXPORT_SECRET_FILE)")
	secretsFile := fs.String("secrets-key-file", env("CLEARANCE_SECRETS_KEY_FILE", ""), "file (0600, at least 32 characters) whose key seals callback and connector secrets at rest; empty means "+secretsKeyFile+" in the data directory, created on first start. Servers sharing a database need the same file (env CLEARANCE_SECRETS_KEY_FILE)")
	var approvals approvalFlags
	fs.StringVar(&approvals.url, "approval-url", env("CLEARANCE_APPROVAL_URL", ""), "base URL of the approval service of managed escalations, for every org; empty means none (env CLEARANCE_APPROVAL_URL)")
	fs.StringVar(&approvals.credentialFile, "approval-credential-file", env("CLEARANCE_APPROVAL_CREDENTIAL_FILE", ""), "file (0600) holding the credential presented to --approval-url (env CLEARANCE_APPROVAL_CREDENTIAL_FILE)")
	fs.StringVar(&approvals.issuer, "approval-issuer", env("CLEARANCE_APPROVAL_ISSUER", ""), "the iss of --approval-url's receipts; empty means the URL itself (env CLEARANCE_APPROVAL_ISSUER)")
	fs.StringVar(&approvals.configFile, "approval-config", env("CLEARANCE_APPROVAL_CONFIG", ""), "JSON file naming per-org approval services {default, orgs: {org_id: {base_url, credential_file, issuer, disabled}}} (env CLEARANCE_APPROVAL_CONFIG)")
	allowPrivate := fs.Bool("allow-private-destinations", false, "let outbound calls (approval services, decision callbacks) reach loopback, private and link-local addresses: development and tests on one machine only")
	escalationTTL := fs.Duration("escalation-ttl", 0, "how long a managed escalation waits for its approval before it expires; 0 means 15m")
	smtpURL := fs.String("smtp-url", env("CLEARANCE_SMTP_URL", ""), "SMTP server for sign-up codes: smtp://[user:pass@]host:port (STARTTLS when offered, required with credentials) or smtps://host:port; empty means each message is written as an .eml file under mailbox/ in the data directory (env CLEARANCE_SMTP_URL)")
	mailFrom := fs.String("mail-from", env("CLEARANCE_MAIL_FROM", defaultMailFrom), "sender address of the mail Clearance sends (env CLEARANCE_MAIL_FROM)")
	publicURL := fs.String("public-url", env("CLEARANCE_PUBLIC_URL", ""), "origin clients reach this server at, e.g. https://clearance.example.com, for the absolute URLs answers carry (a deployment bundle's webhook_url); empty means the request's own scheme and host (env CLEARANCE_PUBLIC_URL)")
	issuer := fs.String("issuer", env("CLEARANCE_ISSUER", clearance.DefaultIssuer), "this deployment's name: the iss of its grants and federated decision envelopes, the origin of its ledger checkpoints and the audience prefix of its orgs' trust lists; deployments that federate decisions need distinct ones, e.g. https://clearance.example.com; choose it before the first start (stored checkpoints name it) (env CLEARANCE_ISSUER)")
	policySourceRoots := fs.String("policy-source-roots", env("CLEARANCE_POLICY_SOURCE_ROOTS", ""), "comma-separated directories under which an org may link a local Git repository as its policy source; empty means remote repositories only (env CLEARANCE_POLICY_SOURCE_ROOTS)")
	var hooks webhookFlags
	fs.Var(&hooks.retries, "webhook-retries", "comma-separated waits after each failed callback attempt, e.g. 10s,30s,2m; after the last the delivery is dead-lettered; empty means the documented schedule (10s,30s,2m,10m,30m,1h,3h,6h)")
	fs.DurationVar(&hooks.lease, "webhook-lease", 0, "how long a server holds a callback delivery before another may take it over (after a crash); 0 means 1m, and it is at least the attempt timeout + 5s (15s)")
	fs.DurationVar(&hooks.poll, "webhook-poll", 0, "how often the callback worker looks for due deliveries when no event wakes it; 0 means 1s")
	var tracing tracingConfig
	fs.StringVar(&tracing.endpoint, "otlp-endpoint", env("CLEARANCE_OTLP_ENDPOINT", ""), "OTLP/HTTP base URL that OpenTelemetry traces are exported to, e.g. http://localhost:4318 (spans go to its /v1/traces); empty means tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (env CLEARANCE_OTLP_ENDPOINT)")
	fs.Float64Var(&tracing.sampleRatio, "trace-sample-ratio", 1, "share of traces sampled, 0 to 1, when tracing is on; a request with a W3C traceparent joins the caller's trace, unsampled when the caller's is, sampled at this ratio otherwise")
	accessLog := fs.Bool("access-log", true, "log one info line per request (method, route pattern, status, duration, request id, org id, response bytes; never headers, query strings or bodies); --access-log=false turns it off (5xx answers are logged at warn level either way)")
	configFile := addConfigFlags(fs)
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if err := configFile.apply(fs, os.LookupEnv); err != nil {
		fmt.Fprintf(stderr, "clearance: %v\n", err)
		return 2
	}
	if u, err := neturl.Parse(*publicURL); *publicURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") ||
		u.Host == "" || u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "") {
		fmt.Fprintf(stderr, "clearance: bad --public-url %q: want an origin such as https://clearance.example.com\n", *publicURL)
		return 2
	}
	if err := tracing.check(); err != nil {
		fmt.Fprintf(stderr, "clearance: %v\n", err)
		return 2
	}
	if *keyReload < 0 {
		fmt.Fprintf(stderr, "clearance: bad --key-reload-interval %v: negative\n", *keyReload)
		return 2
	}
	if p, ok := gcPercent(os.Getenv); ok {
		debug.SetGCPercent(p)
	}
	if n, ok := memoryLimit(os.Getenv, !isPostgres(*storeURL), storeCachesOnGoHeap); ok {
		debug.SetMemoryLimit(n)
	}
	if mallocTrims && !isPostgres(*storeURL) {
		trimCtx, stopTrims := context.WithCancel(ctx)
		defer stopTrims()
		go core.EveryTick(trimCtx, mallocTrimInterval, func() { trimMalloc() })
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "clearance: bad --log-level: %v\n", err)
		return 2
	}
	if configFile.check {
		if err := configFile.printEffective(stdout, fs); err != nil {
			fmt.Fprintf(stderr, "clearance: %v\n", err)
			return 1
		}
		return 0
	}
	log := slog.New(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: level}))
	if err := runServer(ctx, log, serveConfig{data: *data, addr: *addr, metricsAddr: *metricsAddr, store: *storeURL, storeTimeout: *storeTimeout, rateLimit: *rateLimit,
		rateBurst: *rateBurst, authRateLimit: *authRateLimit, authGlobalRateLimit: *authGlobalRateLimit, maxBody: *maxBody, grantKeyFile: *grantKeyFile, ledgerKeyFile: *ledgerKeyFile, reportingKeyFile: *reportingKeyFile, grantTTL: *grantTTL, claimLease: *claimLease,
		shareSecretFile: *shareFile, exportSecretFile: *exportFile, secretsKeyFile: *secretsFile, keyReloadInterval: *keyReload, intentMaxAge: *intentMaxAge,
		maxClockSkew: *maxClockSkew, maxJSONMembers: *maxJSONMembers, maxJSONElements: *maxJSONElements,
		approvals: approvals, allowPrivate: *allowPrivate, escalationTTL: *escalationTTL, webhooks: hooks,
		smtpURL: *smtpURL, mailFrom: *mailFrom, publicURL: *publicURL, policySourceRoots: splitList(*policySourceRoots), issuer: *issuer,
		tracing: tracing, accessLog: *accessLog}); err != nil {
		log.Error("server stopped", "error", err.Error())
		return 1
	}
	return 0
}

type serveConfig struct {
	data, addr, store    string
	storeTimeout         time.Duration // pgstore.Options.Timeout
	metricsAddr          string
	rateLimit            float64
	rateBurst            int
	maxBody              int64
	grantKeyFile         string
	ledgerKeyFile        string
	reportingKeyFile     string
	grantTTL, claimLease time.Duration
	shareSecretFile      string
	exportSecretFile     string
	secretsKeyFile       string
	// keyReloadInterval is how often the grant key file is checked for a
	// change; 0 means only on SIGHUP.
	keyReloadInterval time.Duration
	intentMaxAge      time.Duration
	maxClockSkew      time.Duration
	maxJSONMembers    int
	maxJSONElements   int
	approvals         approvalFlags
	allowPrivate      bool
	policySourceRoots []string
	issuer            string
	escalationTTL     time.Duration
	webhooks          webhookFlags
	smtpURL, mailFrom string
	publicURL         string
	// authRateLimit and authGlobalRateLimit are server.Options'
	// AuthRateLimit and AuthGlobalRateLimit.
	authRateLimit, authGlobalRateLimit float64
	tracing                            tracingConfig
	accessLog                          bool
}

func runServer(ctx context.Context, log *slog.Logger, cfg serveConfig) error {
	if err := os.MkdirAll(cfg.data, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	dataDir, _ := filepath.Abs(cfg.data)
	// Keys before the store: a missing key file is refused before the
	// database is touched. SIGHUP (reread the grant key file) is caught from
	// here on, so that it never ends the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	approvalServices, err := cfg.approvals.directory()
	if err != nil {
		return err
	}
	if cfg.allowPrivate {
		log.Warn("--allow-private-destinations is on: outbound calls may reach loopback, private and link-local addresses; never in production")
	}
	grantKeys, err := openGrantKeys(log, dataDir, cfg.grantKeyFile)
	if err != nil {
		return err
	}
	ledgerKey, ledgerKID, err := loadLedgerKey(log, dataDir, cfg.ledgerKeyFile)
	if err != nil {
		return err
	}
	producer, err := dataDirKey(log, dataDir, "producer")
	if err != nil {
		return err
	}
	var reportingKey grant.Key
	if cfg.reportingKeyFile != "" {
		if reportingKey, err = keyfile.LoadFile(cfg.reportingKeyFile); err != nil {
			return fmt.Errorf("reporting key file: %w", err)
		}
		if err := keyOfItsOwn(reportingKey, grantKeys.ring, ledgerKID, producer); err != nil {
			return err
		}
	}
	backend, err := openStore(ctx, log, cfg.store, dataDir, cfg.storeTimeout)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	if isPostgres(cfg.store) && cfg.shareSecretFile == "" {
		log.Warn("several servers on one database must share the share-link secret: pass the same --share-secret-file to each, or links made by one are refused by the others")
	}
	if isPostgres(cfg.store) && cfg.grantKeyFile == "" {
		log.Warn("several servers on one database must share the grant signing key: pass the same --grant-key-file to each, or grants minted by one are refused by the others")
	}
	if isPostgres(cfg.store) && cfg.ledgerKeyFile == "" {
		log.Warn("several servers on one database must share the ledger key: pass the same --ledger-key-file to each, or checkpoints signed by one fail verification by the others")
	}
	defer func() {
		if err := backend.Close(); err != nil {
			log.Error("close store", "error", err.Error())
		}
	}()
	shareSecret, err := loadShareSecret(log, dataDir, cfg.shareSecretFile)
	if err != nil {
		return err
	}
	exportSecret, err := loadExportSecret(log, dataDir, cfg.exportSecretFile, isPostgres(cfg.store))
	if err != nil {
		return err
	}
	secretsKey, err := loadSecretsKey(log, dataDir, cfg.secretsKeyFile, isPostgres(cfg.store))
	if err != nil {
		return err
	}
	if cfg.mailFrom == "" {
		cfg.mailFrom = defaultMailFrom
	}
	mailer, err := clearance.NewMailer(cfg.smtpURL, dataDir, cfg.mailFrom, log)
	if err != nil {
		return fmt.Errorf("mail: %w", err)
	}
	if cfg.smtpURL == "" {
		log.Info("mail (sign-up codes) is written to the data directory's mailbox, not sent; pass --smtp-url to send it", "mailbox", filepath.Join(dataDir, "mailbox"))
	}
	tracer, stopTracing, err := newTracerProvider(ctx, cfg.tracing, os.Getenv)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(ctx); err != nil {
			log.Warn("flushing traces failed", "error", err.Error())
		}
	}()
	if tracer != nil {
		log.Info("tracing on: spans are exported over OTLP/HTTP", "sample_ratio", cfg.tracing.sampleRatio)
	}
	engine, err := clearance.Open(backend, clearance.Options{Logger: log, TracerProvider: tracer, ShareSecret: shareSecret, Mailer: mailer, GrantKeys: grantKeys.ring, LedgerKey: ledgerKey,
		ProducerKey: producer, ReportingKey: reportingKey, GrantTTL: cfg.grantTTL, ClaimLease: cfg.claimLease, ExportSecret: exportSecret, SecretsKey: secretsKey,
		IntentMaxAge: cfg.intentMaxAge, MaxClockSkew: cfg.maxClockSkew, MaxJSONMembers: cfg.maxJSONMembers, MaxJSONElements: cfg.maxJSONElements,
		ApprovalServices: approvalServices, AllowPrivateDestinations: cfg.allowPrivate, EscalationTTL: cfg.escalationTTL,
		PolicySourceRoots: cfg.policySourceRoots, Issuer: cfg.issuer,
		Webhooks: webhook.WorkerOptions{Retries: cfg.webhooks.retries, Lease: cfg.webhooks.lease, Poll: cfg.webhooks.poll}})
	if err != nil {
		return err
	}
	if err := ensurePlatformKey(ctx, log, engine, dataDir); err != nil {
		return err
	}
	// Grant keys revoked in the database apply before the first request,
	// then within a second of being revoked anywhere.
	if err := engine.Admin.RefreshKeyRevocations(ctx); err != nil {
		return err
	}
	// The engine's workers (sealer, key revocations, validation packs) stop
	// before the store closes (defers run last in, first out); a pack being
	// built is handed back.
	runCtx, stopWorkers := context.WithCancel(ctx)
	workersDone := make(chan struct{})
	go func() { defer close(workersDone); engine.Run(runCtx) }()
	defer func() { stopWorkers(); <-workersDone }()
	grantKeys.engine = engine
	reloadCtx, stopReload := context.WithCancel(ctx)
	reloadDone := make(chan struct{})
	go func() { defer close(reloadDone); grantKeys.run(reloadCtx, cfg.keyReloadInterval, hup) }()
	defer func() { stopReload(); <-reloadDone }()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv := server.New(engine, server.Options{Logger: log, Registerer: reg, TracerProvider: tracer, DisableAccessLog: !cfg.accessLog, RateLimit: cfg.rateLimit,
		RateBurst: cfg.rateBurst, AuthRateLimit: cfg.authRateLimit, AuthGlobalRateLimit: cfg.authGlobalRateLimit, MaxBodyBytes: cfg.maxBody, Keys: serviceKeys(ledgerKID, reportingKey), PublicURL: cfg.publicURL})
	hs := srv.HTTPServer(cfg.addr)
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if cfg.metricsAddr != "" {
		stopMetrics, err := serveMetrics(log, srv, cfg.metricsAddr)
		if err != nil {
			_ = ln.Close()
			return err
		}
		defer stopMetrics()
	}
	log.Info("listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String(), "data", dataDir, "version", clearance.Version)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests")
	shutCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// serveMetrics serves the metrics page alone, without authentication, on
// addr; it warns when addr is not a loopback address, since the counts
// cover every org.
func serveMetrics(log *slog.Logger, srv *server.Server, addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen: %w", err)
	}
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err != nil || !ap.Addr().IsLoopback() {
		log.Warn("the metrics listener is not on a loopback address: anyone who reaches it sees every org's traffic counts", "addr", ln.Addr().String())
	}
	hs := &http.Server{Handler: srv.MetricsHandler(), ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	log.Info("metrics listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String()+"/metrics")
	return func() { _ = hs.Close() }, nil
}

// dataDirKey is the active key of the named ring in the data dir, created
// (0600) on first start; a creation is logged.
func dataDirKey(log *slog.Logger, dataDir, name string) (grant.Key, error) {
	k, created, err := keyfile.LoadOrCreate(dataDir, name)
	if err != nil {
		return grant.Key{}, fmt.Errorf("%s key: %w", name, err)
	}
	if created {
		log.Info("created signing key", "key", name, "kid", k.KID(), "dir", filepath.Join(dataDir, "keys"))
	}
	return k, nil
}

// loadLedgerKey is the key that signs ledger checkpoints, and its kid: an
// operator's key file, or the ledger key in the data dir (created only
// then).
func loadLedgerKey(log *slog.Logger, dataDir, keyFile string) (*ledger.Key, string, error) {
	var (
		k   grant.Key
		err error
	)
	if keyFile != "" {
		if k, err = keyfile.LoadFile(keyFile); err != nil {
			return nil, "", fmt.Errorf("ledger key file: %w", err)
		}
	} else if k, err = dataDirKey(log, dataDir, "ledger"); err != nil {
		return nil, "", err
	}
	lk, err := ledger.NewKey(ledgerKeyName, k.Seed())
	return lk, k.KID(), err
}

// keyOfItsOwn refuses a reporting key that is also a grant key (in the
// ring, retired or revoked), the ledger key or the producer key: each kind
// of signed artifact has a key of its own.
func keyOfItsOwn(reporting grant.Key, ring *grant.KeyRing, ledgerKID string, producer grant.Key) error {
	kids := []string{ledgerKID, producer.KID()}
	if ring != nil {
		kids = append(kids, ring.Active().KID())
		for _, k := range ring.Previous() {
			kids = append(kids, k.Key.KID())
		}
		for _, k := range ring.Revoked() {
			kids = append(kids, k.KID)
		}
	}
	for _, kid := range kids {
		if kid == reporting.KID() {
			return fmt.Errorf("--reporting-key-file: the reporting key %s is also a grant, ledger or producer key; create one of its own with clearance keys init --reporting-key-file FILE", kid)
		}
	}
	return nil
}

// serviceKeys names the signing keys /v1/health reports, by role.
func serviceKeys(ledgerKID string, reporting grant.Key) map[string]string {
	keys := map[string]string{"ledger": ledgerKID}
	if !reporting.IsZero() {
		keys["reporting"] = reporting.KID()
	}
	return keys
}

// ledgerKeyName names the ledger key in signed notes.
const ledgerKeyName = "clearance-ledger"

// ensurePlatformKey creates the platform API key on first start (0600) and
// registers it with the store.
func ensurePlatformKey(ctx context.Context, log *slog.Logger, engine *clearance.Engine, dataDir string) error {
	path := filepath.Join(dataDir, platformKeyFile)
	secret, err := keyfile.ReadSecret(path)
	created := false
	if errors.Is(err, os.ErrNotExist) {
		if secret, err = engine.Admin.NewPlatformSecret(); err != nil {
			return err
		}
		if err := keyfile.WriteSecret(path, secret); err != nil {
			return fmt.Errorf("write platform key: %w", err)
		}
		created = true
	} else if err != nil {
		return fmt.Errorf("read platform key: %w", err)
	}
	if err := engine.Admin.EnsurePlatformKey(ctx, secret); err != nil {
		return err
	}
	if created {
		log.Info("created platform API key", "file", path, "hint", "clearance admin org create --name NAME")
	}
	return nil
}

// isPostgres reports whether a --store value names PostgreSQL.
func isPostgres(url string) bool {
	return strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://")
}

// openStore opens the backend a --store value names: empty for embedded
// Pebble in the data dir, a postgres:// URL for PostgreSQL (migrations are
// applied on open) whose calls are bounded by timeout (--store-timeout).
func openStore(ctx context.Context, log *slog.Logger, url, dataDir string, timeout time.Duration) (store.Backend, error) {
	switch {
	case url == "":
		return pebblestore.Open(filepath.Join(dataDir, "db"), pebblestore.Options{Logger: pebbleLogger{log}})
	case isPostgres(url):
		return pgstore.Open(ctx, url, pgstore.Options{Timeout: timeout})
	}
	return nil, fmt.Errorf("--store %q: use a postgres:// URL, or leave it empty for the embedded store", redactURL(url))
}

// redactURL hides a password in a store URL before it is shown.
func redactURL(s string) string {
	u, err := neturl.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
