package spend

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// Codes of spend gates.
const (
	// CodeSpendLimitExceeded: a claim's amount does not fit in what is
	// left of a gate's budget (409); nothing is claimed. It is the reason
	// code the evaluator gives such an action too.
	CodeSpendLimitExceeded = policy.ReasonSpendLimitExceeded
	// CodeSpendCurrencyMismatch: a claim's currency is not a gate's (409).
	CodeSpendCurrencyMismatch = policy.ReasonSpendCurrencyMismatch
	// CodeSpendGateNotFound: the active policy has no such gate (404).
	CodeSpendGateNotFound = "SPEND_GATE_NOT_FOUND"
)

// Reservation states.
const (
	Reserved  = "RESERVED"
	Committed = "COMMITTED"
	Released  = "RELEASED"
	Held      = "HELD"
)

const (
	kindUsage       = "spend.usage"
	kindReservation = "spend.reservation"
)

// Usage is a budget's count in one window, in micros.
type Usage struct {
	GateID string `json:"gate_id"`
	// PartitionRef names the actor of a per-actor gate without its id
	// (see partitionRef); "" for a shared budget.
	PartitionRef string        `json:"partition_ref,omitempty"`
	Currency     string        `json:"currency"`
	Window       policy.Window `json:"window"`
	WindowStart  string        `json:"window_start"`
	Reserved     int64         `json:"reserved"`
	Committed    int64         `json:"committed"`
	Held         int64         `json:"held"`
}

// Used is what counts against the limit.
func (u Usage) Used() int64 { return u.Reserved + u.Committed + u.Held }

// Charge is one gate's part of a reservation.
type Charge struct {
	GateID       string        `json:"gate_id"`
	PartitionRef string        `json:"partition_ref,omitempty"`
	Currency     string        `json:"currency"`
	Window       policy.Window `json:"window"`
	WindowStart  string        `json:"window_start"`
	Amount       int64         `json:"amount_micros"`
}

// Reservation is what a claimed grant charged, and how far it settled.
type Reservation struct {
	GrantID    string   `json:"grant_id"`
	State      string   `json:"state"`
	Charges    []Charge `json:"charges"`
	ReservedAt string   `json:"reserved_at"`
	SettledAt  string   `json:"settled_at,omitempty"`
}

// Service keeps the org's budgets.
type Service struct{ d core.Deps }

// New returns the spend service over d.
func New(d core.Deps) *Service { return &Service{d: d} }

// usageID names the usage record of a budget in a window. The window's
// kind and the currency are part of it: a new version of a gate that
// counts in another window or currency starts a budget of its own rather
// than reading micros of another unit or period (an HOUR and a DAY window
// start at the same instant at midnight).
func usageID(gateID string, w policy.Window, currency, ref string, start time.Time) string {
	if ref == "" {
		ref = "-"
	}
	return gateID + "/" + string(w) + "/" + currency + "/" + strconv.FormatInt(start.Unix(), 10) + "/" + ref
}

// partitionRef names a per-actor budget in what is stored and ledgered
// without the actor's id, which may be personal data an erasure must not
// leave behind: a MAC under the engine's secrets key when it has one (so
// that a guessed id cannot be confirmed), else its SHA-256. Either way
// 128 bits in hex; "" for a shared budget. Configuring a secrets key later
// starts per-actor budgets afresh.
func (s *Service) partitionRef(orgID, actorID string) string {
	if actorID == "" {
		return ""
	}
	var sum []byte
	if s.d.Secrets != nil {
		sum = s.d.Secrets.MAC([]byte(actorID), "spend/partition/"+orgID)
	} else {
		h := sha256.Sum256([]byte(orgID + "\x00" + actorID))
		sum = h[:]
	}
	return hex.EncodeToString(sum[:16])
}

// Status returns what is used of every gate of c that applies to in, at
// now, as the committed store says, and what a dossier records of it; nil
// when no gate applies. A failed read refuses the evaluation (503): a
// budget is never taken as unused because it could not be read.
func (s *Service) Status(ctx context.Context, orgID string, c *policy.Compiled, in *policy.Input, now time.Time) (map[string]policy.SpendStatus, []dossier.SpendCheck, error) {
	charges := c.Charges(in)
	if len(charges) == 0 {
		return nil, nil, nil
	}
	status := make(map[string]policy.SpendStatus, len(charges))
	checks := make([]dossier.SpendCheck, 0, len(charges))
	for _, ch := range charges {
		start := ch.Window.Start(now)
		var u Usage
		if !ch.CurrencyMismatch {
			err := core.ReadCommitted(ctx, s.d.Store, orgID, kindUsage, usageID(ch.GateID, ch.Window, ch.Currency, s.partitionRef(orgID, ch.Partition), start), &u)
			if err != nil && !core.IsNotFound(err) {
				return nil, nil, core.Unavailable("read spend budget", err)
			}
		}
		status[ch.GateID] = policy.SpendStatus{Currency: ch.Currency, Limit: ch.Limit, Used: u.Used()}
		checks = append(checks, dossier.SpendCheck{GateID: ch.GateID, Currency: ch.Currency,
			WindowStart: start.Format(core.TimeFormat), Limit: policy.FormatMicros(ch.Limit),
			Used: policy.FormatMicros(u.Used()), Amount: policy.FormatMicros(ch.Amount)})
	}
	return status, checks, nil
}

// Reserve charges grantID's amount to every gate in charges, in tx (the
// claim's transaction of the org), at the store's time at. An amount that
// does not fit, or a currency that is not the gate's, refuses it and the
// caller's transaction must not commit.
func (s *Service) Reserve(ctx context.Context, tx store.Tx, grantID string, charges []policy.GateCharge, at time.Time) error {
	if len(charges) == 0 {
		return nil
	}
	r := Reservation{GrantID: grantID, State: Reserved, ReservedAt: at.Format(core.TimeFormat)}
	for _, ch := range charges {
		if ch.CurrencyMismatch {
			return core.New(core.ErrConflict, CodeSpendCurrencyMismatch, "spend gate %q counts %s; the action is in another currency", ch.GateID, ch.Currency)
		}
		ref := s.partitionRef(tx.OrgID(), ch.Partition)
		// The gate's own window decides; every kind of window counts, so
		// that a later version of the gate with another window continues
		// from what was spent in it.
		err := eachWindow(ctx, tx, ch.GateID, ch.Currency, ref, at, func(w policy.Window, u *Usage) error {
			if w == ch.Window && ch.Amount > ch.Limit-u.Used() {
				return core.New(core.ErrConflict, CodeSpendLimitExceeded, "spend gate %q: %s %s does not fit in the %s left of %s this %s",
					ch.GateID, policy.FormatMicros(ch.Amount), ch.Currency, policy.FormatMicros(max(0, ch.Limit-u.Used())),
					policy.FormatMicros(ch.Limit), windowName(ch.Window))
			}
			u.Reserved += ch.Amount
			return nil
		})
		if err != nil {
			return err
		}
		r.Charges = append(r.Charges, Charge{GateID: ch.GateID, PartitionRef: ref, Currency: ch.Currency,
			Window: ch.Window, WindowStart: ch.Window.Start(at).Format(core.TimeFormat), Amount: ch.Amount})
	}
	if err := core.WriteRecord(ctx, tx, kindReservation, grantID, at, r); err != nil {
		return err
	}
	return core.AppendRecord(ctx, tx, ledger.KindSpendReserved, grantID, r, at)
}

// Settle moves grantID's reservation on to what state says of the grant,
// in tx (the transaction that records that state). A grant without a
// reservation, or one already settled that far, is left alone.
func (s *Service) Settle(ctx context.Context, tx store.Tx, grantID string, state claim.State, at time.Time) error {
	var r Reservation
	err := core.ReadRecord(ctx, tx, kindReservation, grantID, &r)
	if core.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	next := transition(r.State, state)
	if next == "" {
		return nil
	}
	reservedAt, err := time.Parse(core.TimeFormat, r.ReservedAt)
	if err != nil {
		return fmt.Errorf("spend: reservation of %s: %w", grantID, err)
	}
	for _, ch := range r.Charges {
		err := eachWindow(ctx, tx, ch.GateID, ch.Currency, ch.PartitionRef, reservedAt, func(_ policy.Window, u *Usage) error {
			switch r.State {
			case Reserved:
				u.Reserved -= ch.Amount
			case Held:
				u.Held -= ch.Amount
			}
			switch next {
			case Committed:
				u.Committed += ch.Amount
			case Held:
				u.Held += ch.Amount
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	r.State, r.SettledAt = next, at.Format(core.TimeFormat)
	if err := core.WriteRecord(ctx, tx, kindReservation, grantID, at, r); err != nil {
		return err
	}
	return core.AppendRecord(ctx, tx, ledger.KindSpendSettled, grantID, r, at)
}

// transition is the reservation state a grant state leads to from from;
// "" when nothing changes.
func transition(from string, to claim.State) string {
	switch {
	case from == Reserved && to == claim.StateCommitted, from == Held && to == claim.StateCommitted:
		return Committed
	case from == Reserved && to == claim.StateFailed, from == Held && to == claim.StateFailed:
		return Released
	case from == Reserved && to == claim.StateIndeterminate:
		return Held
	}
	return ""
}

// windows are the kinds of window every charge counts in.
var windows = [...]policy.Window{policy.WindowHour, policy.WindowDay, policy.WindowWeek, policy.WindowMonth}

// eachWindow reads the usage of a budget (gate, currency, partition) in
// the window of every kind that holds at, lets change update it, and
// writes it back, in tx. change's error stops it.
func eachWindow(ctx context.Context, tx store.Tx, gateID, currency, ref string, at time.Time, change func(policy.Window, *Usage) error) error {
	for _, w := range windows {
		start := w.Start(at)
		id := usageID(gateID, w, currency, ref, start)
		u, err := readUsage(ctx, tx, id)
		if err != nil {
			return err
		}
		if u.GateID == "" {
			u = Usage{GateID: gateID, PartitionRef: ref, Currency: currency, Window: w, WindowStart: start.Format(core.TimeFormat)}
		}
		if err := change(w, &u); err != nil {
			return err
		}
		if err := core.WriteRecord(ctx, tx, kindUsage, id, tx.Now(), u); err != nil {
			return err
		}
	}
	return nil
}

func readUsage(ctx context.Context, tx store.Tx, id string) (Usage, error) {
	var u Usage
	err := core.ReadRecord(ctx, tx, kindUsage, id, &u)
	if err != nil && !core.IsNotFound(err) {
		return u, err
	}
	return u, nil
}

// ReservationOf returns grantID's reservation; not found when the grant
// charged no gate.
func (s *Service) ReservationOf(ctx context.Context, orgID, grantID string) (Reservation, error) {
	var r Reservation
	if artifact.ValidateKey(orgID, kindReservation, grantID) != nil {
		// No grant has such an id: what a store would refuse to look up
		// is simply not there.
		return r, core.New(core.ErrNotFound, CodeSpendGateNotFound, "the grant charged no spend gate")
	}
	err := core.ReadCommitted(ctx, s.d.Store, orgID, kindReservation, grantID, &r)
	if core.IsNotFound(err) {
		return r, core.New(core.ErrNotFound, CodeSpendGateNotFound, "the grant charged no spend gate")
	}
	if err != nil {
		return r, core.Unavailable("read spend reservation", err)
	}
	return r, nil
}

// GateStatus is one gate of the active policy with its budget now.
type GateStatus struct {
	Gate        policy.SpendGate `json:"gate"`
	Partition   string           `json:"partition,omitempty"`
	WindowStart string           `json:"window_start"`
	WindowEnd   string           `json:"window_end"`
	Limit       string           `json:"limit"`
	Reserved    string           `json:"reserved"`
	Committed   string           `json:"committed"`
	Held        string           `json:"held"`
	Remaining   string           `json:"remaining"`
}

// Gates returns the gates of c (the org's active policy) with their
// budgets in the window that holds now; partition selects the budget of
// one actor for per-actor gates ("" the shared one).
func (s *Service) Gates(ctx context.Context, orgID string, c *policy.Compiled, partition string, now time.Time) ([]GateStatus, error) {
	gates := c.SpendGates()
	out := make([]GateStatus, 0, len(gates))
	for _, g := range gates {
		p := ""
		if g.PerActor {
			p = partition
		}
		start := g.Window.Start(now)
		var u Usage
		err := core.ReadCommitted(ctx, s.d.Store, orgID, kindUsage, usageID(g.ID, g.Window, g.Currency, s.partitionRef(orgID, p), start), &u)
		if err != nil && !core.IsNotFound(err) {
			return nil, core.Unavailable("read spend budget", err)
		}
		limit, _ := g.Limit.Micros()
		out = append(out, GateStatus{Gate: g, Partition: p, WindowStart: start.Format(core.TimeFormat),
			WindowEnd: g.Window.End(start).Format(core.TimeFormat), Limit: policy.FormatMicros(limit),
			Reserved: policy.FormatMicros(u.Reserved), Committed: policy.FormatMicros(u.Committed),
			Held: policy.FormatMicros(u.Held), Remaining: policy.FormatMicros(max(0, limit-u.Used()))})
	}
	return out, nil
}

// Gate returns one gate of c with its budget now.
func (s *Service) Gate(ctx context.Context, orgID string, c *policy.Compiled, gateID, partition string, now time.Time) (GateStatus, error) {
	all, err := s.Gates(ctx, orgID, c, partition, now)
	if err != nil {
		return GateStatus{}, err
	}
	i := slices.IndexFunc(all, func(g GateStatus) bool { return g.Gate.ID == gateID })
	if i < 0 {
		return GateStatus{}, core.New(core.ErrNotFound, CodeSpendGateNotFound, "the active policy has no spend gate %q", gateID)
	}
	return all[i], nil
}

func windowName(w policy.Window) string {
	switch w {
	case policy.WindowHour:
		return "hour"
	case policy.WindowDay:
		return "day"
	case policy.WindowWeek:
		return "week"
	}
	return "month"
}
