package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
	"github.com/clearancehq/clearance/grant"
)

// defaultKeyReloadInterval is how often serve checks the grant key file.
// A check reads a small file and compares it with the last one applied.
const defaultKeyReloadInterval = time.Second

// grantKeyFile keeps the engine's grant key ring in step with the file it
// came from: an operator's --grant-key-file or the ring in the data dir.
// After `clearance keys rotate` or `keys revoke` every server reading the
// file signs and verifies with the new ring within one check, without a
// restart. A file that cannot be read or parsed never takes the keys away:
// the ring in use stays and the failure is logged.
type grantKeyFile struct {
	path   string
	log    *slog.Logger
	ring   *grant.KeyRing    // the ring at start, until engine is set
	engine *clearance.Engine // set once the engine is open
	seen   [sha256.Size]byte // digest of the file bytes last applied
	failed string            // the last failure logged, reported once
}

// openGrantKeys reads the grant key ring at start: the operator's file, or
// the data dir's ring, created on first start.
func openGrantKeys(log *slog.Logger, dataDir, file string) (*grantKeyFile, error) {
	g := &grantKeyFile{path: absPath(file), log: log}
	if file == "" {
		if _, err := dataDirKey(log, dataDir, "grant"); err != nil {
			return nil, err
		}
		g.path, _ = keyfile.RingPath(dataDir, "grant")
	}
	data, err := os.ReadFile(g.path)
	if err == nil {
		g.ring, err = keyfile.ReadRing(g.path)
	}
	if err != nil {
		if file != "" {
			return nil, fmt.Errorf("grant key file: %w (create one with: clearance keys init --grant-key-file %s)", err, file)
		}
		return nil, fmt.Errorf("grant key ring: %w", err)
	}
	g.seen = sha256.Sum256(data)
	return g, nil
}

// run checks the file every interval (never, when it is 0) and at once on
// each value from hup, until ctx ends.
func (g *grantKeyFile) run(ctx context.Context, interval time.Duration, hup <-chan os.Signal) {
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			g.check(false)
		case <-hup:
			g.check(true)
		}
	}
}

// check applies the file's ring when the file's bytes changed (or, forced,
// whatever they are) and reports what it did.
func (g *grantKeyFile) check(forced bool) {
	inUse := g.engine.GrantKeys()
	data, err := os.ReadFile(g.path)
	if err == nil && !forced && sha256.Sum256(data) == g.seen {
		g.recovered(inUse)
		return
	}
	var ring *grant.KeyRing
	if err == nil {
		ring, err = keyfile.ReadRing(g.path)
	}
	if err != nil {
		if forced || err.Error() != g.failed {
			g.log.Error("grant key file unreadable: keeping the keys in use", "file", g.path, "error", err.Error(),
				"active_kid", inUse.Active().KID())
		}
		g.failed = err.Error()
		return
	}
	g.seen = sha256.Sum256(data)
	g.recovered(inUse)
	if sameRing(ring, inUse) {
		if forced {
			g.log.Info("grant keys unchanged", "file", g.path, "active_kid", inUse.Active().KID())
		}
		return
	}
	g.engine.SetGrantKeys(ring)
	g.log.Info("grant keys reloaded", "file", g.path, "active_kid", ring.Active().KID(),
		"previous", previousKIDs(ring), "revoked", revokedKIDs(ring))
}

// recovered reports, once, that the file reads again after a failure.
func (g *grantKeyFile) recovered(inUse *grant.KeyRing) {
	if g.failed == "" {
		return
	}
	g.failed = ""
	g.log.Info("grant key file readable again", "file", g.path, "active_kid", inUse.Active().KID())
}

// sameRing reports whether two rings sign, publish and accept alike.
func sameRing(a, b *grant.KeyRing) bool {
	if a == nil || b == nil {
		return a == b
	}
	if !a.Active().Equal(b.Active()) || !slices.Equal(revokedKIDs(a), revokedKIDs(b)) {
		return false
	}
	return slices.EqualFunc(a.Previous(), b.Previous(), func(x, y grant.RetiredKey) bool {
		return x.Key.Equal(y.Key) && x.KeepUntil.Equal(y.KeepUntil)
	})
}

func previousKIDs(r *grant.KeyRing) []string {
	kids := []string{}
	for _, p := range r.Previous() {
		kids = append(kids, p.Key.KID())
	}
	return kids
}

func revokedKIDs(r *grant.KeyRing) []string {
	kids := []string{}
	for _, k := range r.Revoked() {
		kids = append(kids, k.KID)
	}
	return kids
}
