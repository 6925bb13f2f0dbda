package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store/pgstore"
)

const keysUsage = `usage:
  clearance keys init [--grant-key-file FILE] [--ledger-key-file FILE] [--reporting-key-file FILE]
      create the key file(s) named (0600); an existing file is never replaced
  clearance keys rotate [--grant-key-file FILE | --data DIR] [--drain DURATION]
      a new active grant key; the previous one stays published until its grants drain
  clearance keys revoke --kid KID [--grant-key-file FILE | --data DIR] [--store postgres://…]
      withdraw a leaked grant key at once (a fresh key first if it is the active one);
      with --store, also in the shared database (with --store alone, only there)
  clearance keys agent new [--out agent.key] [--register]
      a new agent signing key (see clearance keys agent -h)
Running servers reading the file pick up a rotation or revocation within
--key-reload-interval (default 1s), or at once on SIGHUP. Every server on the
database applies a revocation made with --store within a second, whatever its
own copy of the file says: one whose file still has the key active signs
nothing until that file is rotated.
`

// keys handles `clearance keys init|rotate|revoke`.
func keys(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		fmt.Fprint(stderr, keysUsage)
		return 2
	}
	switch args[0] {
	case "init":
		return keysInit(args[1:], stdout, stderr)
	case "rotate", "revoke":
		return keysChange(ctx, args[0], args[1:], stdout, stderr)
	case "agent":
		return keysAgent(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "-help", "help":
		fmt.Fprint(stdout, keysUsage)
		return 0
	}
	fmt.Fprintf(stderr, "clearance keys: unknown command %q\n%s", args[0], keysUsage)
	return 2
}

// keysInit creates the key files an operator shares between servers: all of
// them, or, if any already exists, none.
func keysInit(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("keys init", flag.ContinueOnError)
	fl.SetOutput(stderr)
	grantFile := fl.String("grant-key-file", env("CLEARANCE_GRANT_KEY_FILE", ""), "grant signing key ring to create (env CLEARANCE_GRANT_KEY_FILE)")
	ledgerFile := fl.String("ledger-key-file", env("CLEARANCE_LEDGER_KEY_FILE", ""), "ledger checkpoint key to create (env CLEARANCE_LEDGER_KEY_FILE)")
	reportingFile := fl.String("reporting-key-file", env("CLEARANCE_REPORTING_KEY_FILE", ""), "growth-report signing key to create (env CLEARANCE_REPORTING_KEY_FILE)")
	if err := fl.Parse(args); err != nil {
		return flagExit(err)
	}
	// Files named on the command line are the ones asked for: the
	// environment's defaults (set for serve) apply only when none is.
	named := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { named[f.Name] = true })
	if len(named) > 0 {
		for name, v := range map[string]*string{"grant-key-file": grantFile, "ledger-key-file": ledgerFile, "reporting-key-file": reportingFile} {
			if !named[name] {
				*v = ""
			}
		}
	}
	if fl.NArg() != 0 || (*grantFile == "" && *ledgerFile == "" && *reportingFile == "") {
		fmt.Fprint(stderr, "clearance keys init: name the file(s) to create with --grant-key-file, --ledger-key-file and/or --reporting-key-file\n")
		return 2
	}
	seen := map[string]bool{}
	for _, f := range []string{*grantFile, *ledgerFile, *reportingFile} {
		if f != "" && seen[f] {
			fmt.Fprint(stderr, "clearance keys init: each key needs a file of its own\n")
			return 2
		}
		seen[f] = true
	}
	type created struct {
		Key  string `json:"key"`
		File string `json:"file"`
		KID  string `json:"kid"`
	}
	var todo []created
	for _, f := range []created{{Key: "grant", File: *grantFile}, {Key: "ledger", File: *ledgerFile}, {Key: "reporting", File: *reportingFile}} {
		if f.File == "" {
			continue
		}
		if _, err := os.Lstat(f.File); !errors.Is(err, fs.ErrNotExist) {
			if err == nil {
				err = fs.ErrExist
			}
			fmt.Fprintf(stderr, "clearance keys init: %s: %v; nothing was created (rotate an existing grant key with: clearance keys rotate --grant-key-file %s)\n", f.File, err, f.File)
			return 1
		}
		todo = append(todo, f)
	}
	out := struct {
		Created []created `json:"created"`
	}{Created: []created{}}
	for _, f := range todo {
		k, err := keyfile.Create(f.File)
		if err != nil {
			fmt.Fprintf(stderr, "clearance keys init: %s key: %v\n", f.Key, err)
			return 1
		}
		f.KID, f.File = k.KID(), absPath(f.File)
		out.Created = append(out.Created, f)
	}
	b, _ := json.Marshal(out)
	fmt.Fprintln(stdout, string(b))
	return 0
}

// keysChange rotates the grant key ring or revokes one of its keys, in an
// operator's key file or in the data dir; a revocation also goes to the
// shared database named by --store.
func keysChange(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("keys "+cmd, flag.ContinueOnError)
	fl.SetOutput(stderr)
	data := fl.String("data", env("CLEARANCE_DATA", "clearance-data"), "data directory whose grant key ring to change, when no --grant-key-file is given (env CLEARANCE_DATA)")
	file := fl.String("grant-key-file", env("CLEARANCE_GRANT_KEY_FILE", ""), "grant key ring file the servers read (env CLEARANCE_GRANT_KEY_FILE)")
	drain := fl.Duration("drain", clearance.DefaultGrantTTL+clearance.DefaultClaimLease,
		"how long the previous key stays published and accepted: the longest grant lifetime plus the longest claim lease")
	kid, storeURL := new(string), new(string)
	if cmd == "revoke" {
		kid = fl.String("kid", "", "kid of the key to revoke")
		storeURL = fl.String("store", env("CLEARANCE_STORE", ""), "postgres:// URL of the database the servers share: the revocation is recorded there too, and every server on it refuses the key within a second (env CLEARANCE_STORE)")
	}
	if err := fl.Parse(args); err != nil {
		return flagExit(err)
	}
	if fl.NArg() != 0 || (cmd == "revoke" && *kid == "") {
		fmt.Fprint(stderr, keysUsage)
		return 2
	}
	if *storeURL != "" && !isPostgres(*storeURL) {
		fmt.Fprintf(stderr, "clearance keys revoke: --store %q: use a postgres:// URL (the embedded store is changed by its own server)\n", redactURL(*storeURL))
		return 2
	}
	if *storeURL != "" && !registry.ValidKID(*kid) {
		fmt.Fprintf(stderr, "clearance keys revoke: --kid %q: not a key id\n", *kid)
		return 2
	}
	// With --store, the file is changed only when one is named.
	dataSet := os.Getenv("CLEARANCE_DATA") != ""
	fl.Visit(func(f *flag.Flag) { dataSet = dataSet || f.Name == "data" })
	if *storeURL != "" && *file == "" && !dataSet {
		return revokeInStore(ctx, *storeURL, *kid, stdout, stderr)
	}
	path := *file
	if path == "" {
		p, err := keyfile.RingPath(*data, "grant")
		if err != nil {
			fmt.Fprintf(stderr, "clearance keys %s: %v\n", cmd, err)
			return 2
		}
		path = p
	}
	var (
		ring *grant.KeyRing
		err  error
	)
	switch {
	case cmd == "rotate":
		ring, err = keyfile.RotateFile(path, time.Now(), *drain)
	case *storeURL != "":
		// The file must hold the kid (nothing is written otherwise); the
		// database goes first, so that every server refuses the key even
		// if the file cannot be rewritten.
		if err = fileHolds(path, *kid); err == nil {
			if err = storeRevocation(ctx, *storeURL, *kid); err != nil {
				fmt.Fprintf(stderr, "clearance keys revoke: %v; nothing was revoked\n", err)
				return 1
			}
			if ring, err = keyfile.RevokeFile(path, *kid, time.Now()); err != nil {
				err = fmt.Errorf("%w (the revocation is recorded in the database: rerun to update the file)", err)
			}
		}
	default:
		ring, err = keyfile.RevokeFile(path, *kid, time.Now())
	}
	if err != nil {
		fmt.Fprintf(stderr, "clearance keys %s: %v\n", cmd, err)
		return 1
	}
	printRing(stdout, path, ring, *storeURL)
	return 0
}

// fileHolds reports (as an error) whether the ring file at path does not
// hold kid: active, previous or already revoked.
func fileHolds(path, kid string) error {
	ring, err := keyfile.ReadRing(path)
	if err != nil {
		return err
	}
	if ring.Active().KID() == kid {
		return nil
	}
	for _, p := range ring.Previous() {
		if p.Key.KID() == kid {
			return nil
		}
	}
	for _, r := range ring.Revoked() {
		if r.KID == kid {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not in %s", keyfile.ErrUnknownKID, kid, path)
}

// storeRevocation records kid as revoked in the PostgreSQL database at url
// (applying the migrations first, as every server does on start).
func storeRevocation(ctx context.Context, url, kid string) error {
	s, err := pgstore.Open(ctx, url, pgstore.Options{MaxConns: 2})
	if err != nil {
		return err
	}
	defer s.Close()
	return s.RevokeGrantKey(ctx, kid, time.Now())
}

// revokeInStore revokes kid in the database only, for a host without a
// copy of the key file.
func revokeInStore(ctx context.Context, url, kid string, stdout, stderr io.Writer) int {
	if err := storeRevocation(ctx, url, kid); err != nil {
		fmt.Fprintf(stderr, "clearance keys revoke: %v; nothing was revoked\n", err)
		return 1
	}
	b, _ := json.Marshal(struct {
		KID   string `json:"revoked_kid"`
		Store string `json:"store"`
	}{kid, redactURL(url)})
	fmt.Fprintln(stdout, string(b))
	return 0
}

// printRing prints a ring's kids as one JSON line, with the database the
// revocation was also recorded in (storeURL, redacted) when there is one.
func printRing(stdout io.Writer, path string, ring *grant.KeyRing, storeURL string) {
	type prev struct {
		KID       string `json:"kid"`
		KeepUntil string `json:"keep_until"`
	}
	type revoked struct {
		KID       string `json:"kid"`
		RevokedAt string `json:"revoked_at"`
	}
	out := struct {
		File     string    `json:"file"`
		Active   string    `json:"active_kid"`
		Previous []prev    `json:"previous"`
		Revoked  []revoked `json:"revoked"`
		Store    string    `json:"store,omitempty"`
	}{File: absPath(path), Active: ring.Active().KID(), Previous: []prev{}, Revoked: []revoked{}}
	if storeURL != "" {
		out.Store = redactURL(storeURL)
	}
	for _, p := range ring.Previous() {
		out.Previous = append(out.Previous, prev{p.Key.KID(), p.KeepUntil.UTC().Format(time.RFC3339)})
	}
	for _, r := range ring.Revoked() {
		out.Revoked = append(out.Revoked, revoked{r.KID, r.RevokedAt.UTC().Format(time.RFC3339)})
	}
	b, _ := json.Marshal(out)
	fmt.Fprintln(stdout, string(b))
}

// absPath is path made absolute, for output an operator can copy.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
