package client

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
)

// Agent runs guarded actions for one org with one agent signing key: it
// signs the intent, asks for a grant, claims it, runs the action only when
// the claim says so, and finalizes.
type Agent struct {
	Client *Client
	// Key signs the intents; its public JWK must be registered as an agent
	// key of the org (Register does it).
	Key   grant.Key
	OrgID string
	// Now is the clock intents are stamped with; time.Now when nil.
	Now func() time.Time
	// FinalizeTimeout bounds the finalization after the action, which runs
	// even when the caller's context has ended (default 10 s).
	FinalizeTimeout time.Duration
	// LeaseMargin is kept free at the end of the claim lease for the
	// finalization: the action starts only when more than this is left, and
	// its context ends this long before the lease does (default 3 s).
	LeaseMargin time.Duration
}

// ErrIndeterminate is what an action returns (wrapped) when it cannot tell
// whether its effect happened — a timeout after the request was sent, a
// connection lost mid-call: Run then finalizes INDETERMINATE, to be
// reconciled, instead of FAILED, which says the effect did not happen.
var ErrIndeterminate = errors.New("clearance: the action may have taken effect")

// ErrNoTimeToAct is returned by Run when the claim came back with less of
// its lease left than LeaseMargin: the action was not started and the claim
// was finalized FAILED.
var ErrNoTimeToAct = errors.New("clearance: the claim lease left no time to run the action")

// ErrNotGranted is returned by Agent.Run when the decision bound no grant
// (any outcome but ALLOW, SHADOW mode, or a managed escalation waiting for
// its approval); the action did not run.
var ErrNotGranted = errors.New("clearance: no grant: the action was not run")

// ActFunc is what the agent runs once its claim says should_execute. ctx
// ends at the claim lease's end. Return the effect's evidence (or nil) and
// nil when the action took effect, an error when it did not.
type ActFunc func(ctx context.Context, claim *ClaimResponse) (*EffectEvidence, error)

// Cycle is what happened in one Agent.Run.
type Cycle struct {
	// SignedIntent is the compact JWS sent.
	SignedIntent string
	Decision     *ExecutionAuthorityDecision
	// Claim is the won claim; nil when there was no grant or the claim was
	// refused.
	Claim *ClaimResponse
	// Ran reports whether the action was called.
	Ran bool
	// Outcome is what was reported to finalize-token ("" when nothing ran).
	Outcome ExecutionFinalizeRequestOutcome
	// Finalized is the finalize-token answer; nil when finalization failed
	// or nothing ran.
	Finalized *ExecutionFinalizeResponse
}

// Register registers the agent's public key with the org (201, or 200 when
// it was registered before).
func (a *Agent) Register(ctx context.Context, opts ...CallOption) (*RegisteredKey, error) {
	return a.Client.RegisterKey(ctx, AgentKeys, AgentKeyRegistration(a.Key), opts...)
}

// AgentKeyRegistration is the registration of k's public key.
func AgentKeyRegistration(k grant.Key) KeyRegistrationRequest {
	jwk := k.PublicJWK()
	raw, _ := json.Marshal(jwk) // an Ed25519 public JWK always encodes
	var pub PublicJWK
	_ = json.Unmarshal(raw, &pub)
	return KeyRegistrationRequest{Kid: k.KID(), PublicJwk: pub}
}

// Prepare fills what the agent owns in an intent: org_id, a random
// intent_id and nonce when empty, issued_at (the agent's clock, whole
// seconds) when zero, and escalation mode NONE when unset.
func (a *Agent) Prepare(in ExecutionIntent) (ExecutionIntent, error) {
	if a.OrgID != "" {
		id, err := uuid.Parse(a.OrgID)
		if err != nil {
			return in, fmt.Errorf("client: agent org id: %w", err)
		}
		in.OrgId = id
	}
	if in.IntentId == "" {
		in.IntentId = "intent-" + randomHex()
	}
	if in.Nonce == "" {
		in.Nonce = randomHex()
	}
	if in.IssuedAt.IsZero() {
		in.IssuedAt = a.now().UTC().Truncate(time.Second)
	}
	if in.Escalation.Mode == "" {
		in.Escalation.Mode = ExecutionIntentEscalationModeNONE
	}
	return in, nil
}

// SignIntent signs an intent with k as Clearance requires: the RFC 8785
// canonical JSON of the intent as the payload of a compact JWS with the
// header {"alg":"EdDSA","kid":…,"typ":"clearance-intent+jwt"}. intent is
// anything that encodes to the intent's JSON (an ExecutionIntent, a map).
func SignIntent(k grant.Key, intent any) (string, error) {
	var payload []byte
	var err error
	if raw, ok := intent.(json.RawMessage); ok {
		payload, err = canon.Transform(raw)
	} else {
		payload, err = canon.Marshal(intent)
	}
	if err != nil {
		return "", fmt.Errorf("client: intent: %w", err)
	}
	return grant.SignIntent(k, payload)
}

// Run is the guarded cycle: sign the intent, enforce-and-bind, and — only
// for a grant — claim it and call act when, and only when, the claim
// answered should_execute true. It then finalizes: COMMITTED when act
// returned nil (with its evidence), FAILED when act returned an error and
// ctx is still live, INDETERMINATE when act returned ErrIndeterminate,
// panicked (the panic is raised again after finalizing), or ctx or the lease
// (less LeaseMargin) ended before act returned: nobody knows whether the
// effect happened; reconcile it. opts apply to each call of the cycle.
//
// The error is ErrNotGranted (wrapped, with the outcome) when no grant was
// bound, a *Error when a call was refused (a refused claim among them),
// ErrNoTimeToAct, or act's error (joined with the finalization's, if that
// failed too). The Cycle says how far it went.
func (a *Agent) Run(ctx context.Context, intent ExecutionIntent, act ActFunc, opts ...CallOption) (cyc *Cycle, err error) {
	cyc = &Cycle{}
	intent, err = a.Prepare(intent)
	if err != nil {
		return cyc, err
	}
	if cyc.SignedIntent, err = SignIntent(a.Key, intent); err != nil {
		return cyc, err
	}
	if cyc.Decision, err = a.Client.EnforceAndBind(ctx, ExecutionAuthorityRequest{SignedIntent: cyc.SignedIntent}, opts...); err != nil {
		return cyc, err
	}
	d := cyc.Decision
	if d.ExecutionToken == nil || *d.ExecutionToken == "" {
		return cyc, fmt.Errorf("%w (%s in %s, %v)", ErrNotGranted, d.Outcome, d.Mode, d.ReasonCodes)
	}
	sent := time.Now()
	claim, err := a.Client.Claim(ctx, ExecutionClaimTokenRequest{ExecutionToken: *d.ExecutionToken, IntentHash: d.IntentHash}, opts...)
	if err != nil {
		return cyc, err
	}
	if !bool(claim.ShouldExecute) || claim.ClaimToken == "" {
		return cyc, fmt.Errorf("%w: the claim did not say should_execute", ErrNotGranted)
	}
	cyc.Claim = claim

	finalize := func(outcome ExecutionFinalizeRequestOutcome, evidence *EffectEvidence) error {
		cyc.Outcome = outcome
		timeout := a.FinalizeTimeout
		if timeout <= 0 {
			timeout = 10 * time.Second
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		var err error
		cyc.Finalized, err = a.Client.Finalize(fctx, ExecutionFinalizeRequest{
			ExecutionToken: *d.ExecutionToken, ClaimToken: claim.ClaimToken, Outcome: outcome, EffectEvidence: evidence,
		}, opts...)
		return err
	}
	margin := a.LeaseMargin
	if margin <= 0 {
		margin = 3 * time.Second
	}
	deadline := sent.Add(a.leaseOf(claim) - margin)
	if !time.Now().Before(deadline) {
		return cyc, errors.Join(ErrNoTimeToAct, finalize(ExecutionFinalizeRequestOutcomeFAILED, nil))
	}

	cyc.Ran = true
	evidence, actErr, leaseOver, panicked := runAct(ctx, deadline, act, claim)
	outcome := ExecutionFinalizeRequestOutcomeCOMMITTED
	switch {
	case panicked != nil || ctx.Err() != nil || leaseOver || errors.Is(actErr, ErrIndeterminate):
		outcome, evidence = ExecutionFinalizeRequestOutcomeINDETERMINATE, nil
	case actErr != nil:
		outcome, evidence = ExecutionFinalizeRequestOutcomeFAILED, nil
	}
	err = finalize(outcome, evidence)
	if panicked != nil {
		panic(panicked)
	}
	if actErr != nil {
		return cyc, errors.Join(actErr, err)
	}
	if outcome == ExecutionFinalizeRequestOutcomeINDETERMINATE {
		// Never a nil error for an effect nobody can vouch for.
		err = errors.Join(fmt.Errorf("%w: finalized INDETERMINATE, to be reconciled", ErrIndeterminate), ctx.Err(), err)
	}
	return cyc, err
}

// leaseOf is how long the claim's lease lasts: exp − iat of its attestation
// (read for timing only, on the server's clock, so that the two clocks need
// not agree), or, without one, what is left of it on the agent's clock.
func (a *Agent) leaseOf(claim *ClaimResponse) time.Duration {
	if parts := strings.Split(claim.ClaimAttestation, "."); len(parts) == 3 {
		var c struct {
			Iat int64 `json:"iat"`
			Exp int64 `json:"exp"`
		}
		if raw, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil && json.Unmarshal(raw, &c) == nil && c.Exp > c.Iat {
			return time.Duration(c.Exp-c.Iat) * time.Second
		}
	}
	return claim.ClaimLeaseExpiresAt.Sub(a.now())
}

// runAct calls act under a context that ends at deadline (the lease's end
// less the margin) and recovers a panic, to be raised again after
// finalizing. leaseOver reports that the deadline passed while act ran:
// whatever act says, the claim is then INDETERMINATE.
func runAct(ctx context.Context, deadline time.Time, act ActFunc, claim *ClaimResponse) (ev *EffectEvidence, err error, leaseOver bool, panicked any) {
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
		leaseOver = actx.Err() != nil && ctx.Err() == nil
	}()
	ev, err = act(actx, claim)
	return ev, err, false, nil
}

func (a *Agent) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func randomHex() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Ptr returns a pointer to v, for the optional members of request types.
func Ptr[T any](v T) *T { return &v }
