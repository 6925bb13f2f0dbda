package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
}

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
// ctx is still live, INDETERMINATE when act panicked (the panic is raised
// again after finalizing) or ctx ended before act returned (nobody knows
// whether the effect happened; reconcile it).
//
// The error is ErrNotGranted (wrapped, with the outcome) when no grant was
// bound, a *Error when a call was refused (a refused claim among them), or
// act's error. The Cycle says how far it went.
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
	claim, err := a.Client.Claim(ctx, ExecutionClaimTokenRequest{ExecutionToken: *d.ExecutionToken, IntentHash: d.IntentHash}, opts...)
	if err != nil {
		return cyc, err
	}
	if !bool(claim.ShouldExecute) || claim.ClaimToken == "" {
		return cyc, fmt.Errorf("%w: the claim did not say should_execute", ErrNotGranted)
	}
	cyc.Claim = claim

	cyc.Ran = true
	evidence, actErr, leaseOver, panicked := a.runAct(ctx, act, claim)
	outcome := ExecutionFinalizeRequestOutcomeCOMMITTED
	switch {
	case panicked != nil || ctx.Err() != nil || leaseOver:
		outcome, evidence = ExecutionFinalizeRequestOutcomeINDETERMINATE, nil
	case actErr != nil:
		outcome, evidence = ExecutionFinalizeRequestOutcomeFAILED, nil
	}
	cyc.Outcome = outcome
	timeout := a.FinalizeTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	cyc.Finalized, err = a.Client.Finalize(fctx, ExecutionFinalizeRequest{
		ExecutionToken: *d.ExecutionToken, ClaimToken: claim.ClaimToken, Outcome: outcome, EffectEvidence: evidence,
	}, opts...)
	if panicked != nil {
		panic(panicked)
	}
	if actErr != nil {
		return cyc, actErr
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return cyc, err
}

// runAct calls act under a context that ends with the claim lease and
// recovers a panic, to be raised again after finalizing. leaseOver reports
// that the lease ended while act ran: whatever act says, the claim is then
// INDETERMINATE (the server refuses a late finalization and holds the scope
// until it is reconciled).
func (a *Agent) runAct(ctx context.Context, act ActFunc, claim *ClaimResponse) (ev *EffectEvidence, err error, leaseOver bool, panicked any) {
	// The lease is judged on the server's clock; the agent's clock (Now)
	// measures what is left of it.
	actx, cancel := context.WithTimeout(ctx, claim.ClaimLeaseExpiresAt.Sub(a.now()))
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
