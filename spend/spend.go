// Package spend keeps the budgets of spend-control gates (policy.SpendGate):
// how much of each gate's budget the org's claimed actions reserved,
// committed and hold in each window.
//
// # Contract
//
// A budget is counted per gate id, partition (the actor id of a per-actor
// gate) and window (its calendar period, by the store's clock) in one
// usage record of the org. Reserve runs in the claim's transaction: the
// org's transactions are serialized on every backend (one writer per org on
// Pebble; the org's row lock on PostgreSQL, across servers), so two claims
// can never both fit into what is left of a budget. It refuses the claim
// with SPEND_LIMIT_EXCEEDED (409) when an amount does not fit, and writes
// a reservation record under the grant id naming what it charged.
//
// Settle runs in the transaction that records the grant's outcome and
// moves its reservation on: COMMITTED commits the amount, FAILED releases
// it, INDETERMINATE holds it until the execution is reconciled (held
// amounts still count as used, so an unknown outcome never frees budget),
// and reconciling a held one commits or releases it. A grant without a
// reservation is left alone; settling twice changes nothing.
//
// Status gives evaluations what is used of the gates that apply to an
// input (committed reads, before any lock: the reservation at claim is
// what holds the line, the status only lets policy and enforce-and-bind
// see the budget) and what a dossier records of it.
package spend

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	// left of a gate's budget (409); nothing is claimed.
	CodeSpendLimitExceeded = "SPEND_LIMIT_EXCEEDED"
	// CodeSpendCurrencyMismatch: a claim's currency is not a gate's (409).
	CodeSpendCurrencyMismatch = "SPEND_CURRENCY_MISMATCH"
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

// usageID names the usage record of a budget in a window.
func usageID(gateID, ref string, start time.Time) string {
	if ref == "" {
		ref = "-"
	}
	return gateID + "/" + strconv.FormatInt(start.Unix(), 10) + "/" + ref
}

func (ch Charge) usageID() string {
	start, _ := time.Parse(core.TimeFormat, ch.WindowStart)
	return usageID(ch.GateID, ch.PartitionRef, start)
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
			err := core.ReadCommitted(ctx, s.d.Store, orgID, kindUsage, usageID(ch.GateID, s.partitionRef(orgID, ch.Partition), start), &u)
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
		start := ch.Window.Start(at)
		ref := s.partitionRef(tx.OrgID(), ch.Partition)
		id := usageID(ch.GateID, ref, start)
		u, err := readUsage(ctx, tx, id)
		if err != nil {
			return err
		}
		if u.GateID == "" {
			u = Usage{GateID: ch.GateID, PartitionRef: ref, Currency: ch.Currency, Window: ch.Window, WindowStart: start.Format(core.TimeFormat)}
		}
		if ch.Amount > ch.Limit-u.Used() {
			return core.New(core.ErrConflict, CodeSpendLimitExceeded, "spend gate %q: %s %s does not fit in the %s left of %s this %s",
				ch.GateID, policy.FormatMicros(ch.Amount), ch.Currency, policy.FormatMicros(max(0, ch.Limit-u.Used())),
				policy.FormatMicros(ch.Limit), windowName(ch.Window))
		}
		u.Reserved += ch.Amount
		if err := core.WriteRecord(ctx, tx, kindUsage, id, at, u); err != nil {
			return err
		}
		r.Charges = append(r.Charges, Charge{GateID: ch.GateID, PartitionRef: ref, Currency: ch.Currency,
			Window: ch.Window, WindowStart: u.WindowStart, Amount: ch.Amount})
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
	for _, ch := range r.Charges {
		id := ch.usageID()
		u, err := readUsage(ctx, tx, id)
		if err != nil {
			return err
		}
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
		if err := core.WriteRecord(ctx, tx, kindUsage, id, at, u); err != nil {
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
		err := core.ReadCommitted(ctx, s.d.Store, orgID, kindUsage, usageID(g.ID, s.partitionRef(orgID, p), start), &u)
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
