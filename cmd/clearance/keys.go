package main

import (
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
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/keyfile"
)

const keysUsage = `usage:
  clearance keys init --grant-key-file FILE [--ledger-key-file FILE]
      create the first key file(s) (0600); an existing file is never replaced
  clearance keys rotate [--grant-key-file FILE | --data DIR] [--drain DURATION]
      a new active grant key; the previous one stays published until its grants drain
  clearance keys revoke --kid KID [--grant-key-file FILE | --data DIR]
      withdraw a leaked grant key at once (a fresh key first if it is the active one)
Running servers reading the file pick up a rotation or revocation within
--key-reload-interval (default 1s), or at once on SIGHUP.
`

// keys handles `clearance keys init|rotate|revoke`.
func keys(args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		fmt.Fprint(stderr, keysUsage)
		return 2
	}
	switch args[0] {
	case "init":
		return keysInit(args[1:], stdout, stderr)
	case "rotate", "revoke":
		return keysChange(args[0], args[1:], stdout, stderr)
	case "-h", "--help", "help":
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
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() != 0 || (*grantFile == "" && *ledgerFile == "") {
		fmt.Fprint(stderr, "clearance keys init: name the file(s) to create with --grant-key-file and/or --ledger-key-file\n")
		return 2
	}
	if *grantFile != "" && *grantFile == *ledgerFile {
		fmt.Fprint(stderr, "clearance keys init: the grant and the ledger key need two files\n")
		return 2
	}
	type created struct {
		Key  string `json:"key"`
		File string `json:"file"`
		KID  string `json:"kid"`
	}
	var todo []created
	for _, f := range []created{{Key: "grant", File: *grantFile}, {Key: "ledger", File: *ledgerFile}} {
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
// operator's key file or in the data dir.
func keysChange(cmd string, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("keys "+cmd, flag.ContinueOnError)
	fl.SetOutput(stderr)
	data := fl.String("data", env("CLEARANCE_DATA", "clearance-data"), "data directory whose grant key ring to change, when no --grant-key-file is given (env CLEARANCE_DATA)")
	file := fl.String("grant-key-file", env("CLEARANCE_GRANT_KEY_FILE", ""), "grant key ring file the servers read (env CLEARANCE_GRANT_KEY_FILE)")
	drain := fl.Duration("drain", clearance.DefaultGrantTTL+clearance.DefaultClaimLease,
		"how long the previous key stays published and accepted: the longest grant lifetime plus the longest claim lease")
	kid := new(string)
	if cmd == "revoke" {
		kid = fl.String("kid", "", "kid of the key to revoke")
	}
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() != 0 || (cmd == "revoke" && *kid == "") {
		fmt.Fprint(stderr, keysUsage)
		return 2
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
	if cmd == "rotate" {
		ring, err = keyfile.RotateFile(path, time.Now(), *drain)
	} else {
		ring, err = keyfile.RevokeFile(path, *kid, time.Now())
	}
	if err != nil {
		fmt.Fprintf(stderr, "clearance keys %s: %v\n", cmd, err)
		return 1
	}
	printRing(stdout, path, ring)
	return 0
}

// printRing prints a ring's kids as one JSON line.
func printRing(stdout io.Writer, path string, ring *grant.KeyRing) {
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
	}{File: absPath(path), Active: ring.Active().KID(), Previous: []prev{}, Revoked: []revoked{}}
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
