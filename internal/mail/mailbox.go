package mail

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/clearancehq/clearance/internal/privatefile"
)

// Permissions of the mailbox: its files hold sign-in codes.
const (
	DirMode  = 0o700
	FileMode = 0o600
)

const nameLayout = "20060102T150405.000000000Z" // sorts as it reads, in UTC

// Mailbox is the default Mailer: it writes each message as an .eml file in
// its directory, whole or not at all, and logs where. It is safe for
// concurrent use.
type Mailbox struct {
	dir    string
	from   string
	logger *slog.Logger

	mu   sync.Mutex
	last time.Time // the newest time a name was given, so names keep increasing
}

// NewMailbox returns a Mailbox writing to dir, creating it (DirMode) when
// missing. An existing dir that group or others may access is refused. from
// is the sender's bare address (checked like Message.To). A nil logger logs
// nothing.
func NewMailbox(dir string, from string, logger *slog.Logger) (*Mailbox, error) {
	if dir == "" {
		return nil, fmt.Errorf("mail: mailbox directory is empty")
	}
	if err := checkAddress(from); err != nil {
		return nil, fmt.Errorf("mail: sender address: %v", err)
	}
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return nil, fmt.Errorf("mail: mailbox: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("mail: mailbox: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("mail: mailbox %s is not a directory", dir)
	}
	// On Windows the mode bits say nothing about who may read.
	if perm := fi.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, fmt.Errorf("mail: mailbox %s has mode %#o, want 0700 (chmod 700 %s): its files hold sign-in codes", dir, perm, dir)
	}
	return &Mailbox{dir: dir, from: from, logger: orDiscard(logger)}, nil
}

// Dir returns the directory the Mailbox writes to.
func (mb *Mailbox) Dir() string { return mb.dir }

// Send validates m and writes it to a new file <dir>/<UTC time>-<random>.eml
// (FileMode): a temporary file in the same directory, synced, renamed, then
// the directory synced. On error no .eml file is left. It logs the recipient
// and the path at Info, never the subject or the body.
func (mb *Mailbox) Send(ctx context.Context, m Message) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mail: mailbox: %w", err)
	}
	now := mb.tick()
	var rnd [8]byte
	_, _ = rand.Read(rnd[:]) // never fails (crypto/rand)
	path := filepath.Join(mb.dir, now.UTC().Format(nameLayout)+"-"+hex.EncodeToString(rnd[:])+".eml")
	// Whole or not at all, owner-only: the one private-file writer. A
	// name taken already (it cannot be, with the random part) is refused.
	if err := privatefile.Write(path, render(m, mb.from, now), false); err != nil {
		return fmt.Errorf("mail: mailbox: %w", err)
	}
	mb.logger.LogAttrs(ctx, slog.LevelInfo, "mail written to mailbox", slog.String("to", m.To), slog.String("path", path))
	return nil
}

// tick returns the clock, nudged past the last name given: on a clock
// coarser than the Sends, names would otherwise tie and ReadMailbox could
// not keep their order. The random part alone keeps them distinct.
func (mb *Mailbox) tick() time.Time {
	now := time.Now()
	mb.mu.Lock()
	defer mb.mu.Unlock()
	if !now.After(mb.last) {
		now = mb.last.Add(time.Nanosecond)
	}
	mb.last = now
	return now
}

// ReadMailbox parses every .eml file directly in dir (Parse), oldest first:
// by Date, then by file name, which begins with the time of writing to the
// nanosecond. Hidden files, temporary files and other names are skipped; a
// file that does not parse is an error.
func ReadMailbox(dir string) ([]Delivered, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("mail: read mailbox: %w", err)
	}
	var out []Delivered
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".eml") {
			continue
		}
		d, err := readFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Date.Equal(out[j].Date) {
			return out[i].Date.Before(out[j].Date)
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

func readFile(path string) (Delivered, error) {
	f, err := os.Open(path)
	if err != nil {
		return Delivered{}, fmt.Errorf("mail: read mailbox: %w", err)
	}
	defer f.Close()
	d, err := Parse(f)
	if err != nil {
		return Delivered{}, fmt.Errorf("%s: %w", path, err)
	}
	d.Path = path
	return d, nil
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
