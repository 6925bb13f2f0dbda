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
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/clearancehq/clearance/approver"
)

type serveConfig struct {
	addr, data, publicURL, rpID, issuer string
	credentialsFile                     string
	clearanceURL, clearanceKeysFile     string
	maxLifetime                         time.Duration
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg serveConfig
	fs.StringVar(&cfg.addr, "addr", env("CLEARANCE_APPROVER_ADDR", "127.0.0.1:8090"), "listen address (env CLEARANCE_APPROVER_ADDR)")
	fs.StringVar(&cfg.data, "data", env("CLEARANCE_APPROVER_DATA", "clearance-approver-data"), "data directory: state and the receipt signing key, created 0700 (env CLEARANCE_APPROVER_DATA)")
	fs.StringVar(&cfg.publicURL, "public-url", env("CLEARANCE_APPROVER_PUBLIC_URL", "http://localhost:8090"), "the base URL humans open; approval and enrollment links are built on it (env CLEARANCE_APPROVER_PUBLIC_URL)")
	fs.StringVar(&cfg.rpID, "rp-id", env("CLEARANCE_APPROVER_RP_ID", ""), "WebAuthn relying-party id, a domain (not an IP address); empty means the public URL's host")
	fs.StringVar(&cfg.issuer, "issuer", env("CLEARANCE_APPROVER_ISSUER", ""), "iss of the receipts, the issuer Clearance expects of this service; empty means the public URL")
	fs.StringVar(&cfg.credentialsFile, "credentials-file", env("CLEARANCE_APPROVER_CREDENTIALS_FILE", ""), "file of \"org_id credential\" lines: Clearance's credentials for this service, each bound to its org (0600; required)")
	fs.StringVar(&cfg.clearanceURL, "clearance-url", env("CLEARANCE_APPROVER_CLEARANCE_URL", ""), "Clearance's base URL, to send it a completion hint after each decision (optional; needs --clearance-keys-file)")
	fs.StringVar(&cfg.clearanceKeysFile, "clearance-keys-file", env("CLEARANCE_APPROVER_CLEARANCE_KEYS_FILE", ""), "file of \"org_id key\" lines: Clearance API keys for the completion hints (0600)")
	fs.DurationVar(&cfg.maxLifetime, "max-lifetime", approver.DefaultMaxLifetime, "the furthest expires_at a request may have, from now")
	logLevel := fs.String("log-level", env("CLEARANCE_APPROVER_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "clearance-approver serve: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "clearance-approver: bad --log-level: %v\n", err)
		return 2
	}
	if cfg.credentialsFile == "" {
		fmt.Fprintln(stderr, "clearance-approver serve: --credentials-file is required (lines \"org_id credential\", 0600)")
		return 2
	}
	if (cfg.clearanceURL == "") != (cfg.clearanceKeysFile == "") {
		fmt.Fprintln(stderr, "clearance-approver serve: --clearance-url and --clearance-keys-file go together")
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: level}))
	if err := runServer(ctx, log, cfg); err != nil {
		log.Error("approval service stopped", "error", err.Error())
		return 1
	}
	return 0
}

func runServer(ctx context.Context, log *slog.Logger, cfg serveConfig) error {
	creds, err := readCredentials(cfg.credentialsFile)
	if err != nil {
		return fmt.Errorf("credentials file: %w", err)
	}
	var notifier *approver.CompletionNotifier
	if cfg.clearanceURL != "" {
		keys, err := readKeys(cfg.clearanceKeysFile)
		if err != nil {
			return fmt.Errorf("Clearance keys file: %w", err)
		}
		if notifier, err = approver.NewCompletionNotifier(approver.NotifierOptions{ClearanceURL: cfg.clearanceURL, Keys: keys, Logger: log}); err != nil {
			return err
		}
	}
	store, err := approver.OpenFileStore(cfg.data)
	if err != nil {
		return err
	}
	defer func() {
		if err := store.Close(); err != nil {
			log.Error("closing the data directory", "error", err.Error())
		}
	}()
	dataDir, _ := filepath.Abs(cfg.data)
	key, created, err := approver.LoadOrCreateKey(cfg.data)
	if err != nil {
		return fmt.Errorf("receipt signing key: %w", err)
	}
	if created {
		log.Info("created the receipt signing key", "kid", key.KID(), "dir", dataDir)
	}
	opts := approver.Options{
		Issuer: cfg.issuer, PublicURL: cfg.publicURL, RPID: cfg.rpID, SigningKey: key, Credentials: creds,
		Store: store, Logger: log, MaxLifetime: cfg.maxLifetime,
	}
	if notifier != nil {
		opts.OnDecision = notifier.Notify
	}
	svc, err := approver.New(opts)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           svc,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Signals are caught before the service says it listens, so that a
	// SIGTERM sent on seeing that line drains it.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	log.Info("listening", "addr", ln.Addr().String(), "public_url", cfg.publicURL, "issuer", svc.Issuer(), "kid", svc.KeyID(),
		"data", dataDir, "orgs", countOrgs(creds), "completion_hints", notifier != nil)

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	case <-ctx.Done():
	}
	log.Info("shutting down: draining in-flight requests")
	shutCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = hs.Shutdown(shutCtx)
	if notifier != nil {
		hintCtx, cancelHints := context.WithTimeout(context.Background(), 10*time.Second)
		notifier.Close(hintCtx)
		cancelHints()
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

func countOrgs(creds map[string]string) int {
	orgs := map[string]bool{}
	for _, org := range creds {
		orgs[org] = true
	}
	return len(orgs)
}
