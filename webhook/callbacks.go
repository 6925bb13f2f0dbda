package webhook

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/outbox"
	"github.com/clearancehq/clearance/store"
)

// Callbacks are the URLs an automation platform registers for
// decision.resolved (POST /v1/automation/webhooks). Each is a destination
// of its own beside the WEBHOOK integration: its own signing secret, its
// own deliveries and delivery log, the same signature, schedule, dead
// letter and SSRF guard.
const (
	// MaxCallbacks bounds the callback URLs of an org.
	MaxCallbacks = 10
	// CallbackPrefix starts the destination name of a callback: the
	// delivery log's destination is CallbackPrefix + its subscription id.
	CallbackPrefix = "automation:"
	// PrefixCallbackSecret starts a callback's signing secret.
	PrefixCallbackSecret = "clr_whsec_"

	callbacksKind = "webhook.callbacks"
	callbacksID   = "automation"
	// callbackSubscriber is the outbox subscriber of an org's callbacks:
	// subscribed while it has one.
	callbackSubscriber = "automation"
)

// Callback is a registered callback URL, as answered.
type Callback struct {
	SubscriptionID string `json:"subscription_id"`
	URL            string `json:"url"`
	Event          string `json:"event"` // decision.resolved
	Filter         Filter `json:"filter"`
	CreatedAt      string `json:"created_at"`
	// Active is false once the credential that registered it was revoked
	// or expired: nothing is delivered to it any more.
	Active bool `json:"active"`
}

// NewCallback is a registration's answer: the callback and its signing
// secret, shown this once.
type NewCallback struct {
	Callback
	SigningSecret string `json:"signing_secret"`
}

// storedCallback is a callback at rest, its secret sealed.
type storedCallback struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Filter    Filter    `json:"filter"`
	Sealed    string    `json:"sealed"`
	CreatedAt time.Time `json:"created_at"`
	// KeyHash is the credential that registered it (tenant.APIKey.Hash;
	// "" registered by the embedding program): the callback lives only as
	// long as that credential does.
	KeyHash string `json:"key_hash,omitempty"`
}

func (c storedCallback) view(active bool) Callback {
	return Callback{SubscriptionID: c.ID, URL: c.URL, Event: EventDecisionResolved, Filter: c.Filter,
		CreatedAt: c.CreatedAt.Format(core.TimeFormat), Active: active}
}

// live reports whether the credential that registered c still works: a
// revoked or expired credential takes its callbacks with it, so that
// revoking a platform's credential (the owner's org-wide revocation, a
// replayed code) also stops what it registered.
func (s *Service) live(ctx context.Context, orgID string, c storedCallback) (bool, error) {
	if c.KeyHash == "" {
		return true, nil
	}
	k, err := s.d.Store.APIKeyByHash(ctx, c.KeyHash)
	if core.IsNotFound(err) || errors.Is(err, core.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, core.Translate("read the callback's credential", err)
	}
	return k.OrgID == orgID && k.Usable(s.d.Now()), nil
}

// destination is the callback's destination name.
func (c storedCallback) destination() string { return CallbackPrefix + c.ID }

// wants reports whether the callback receives ev: decision.resolved of a
// decision made after it was registered, matching its filter.
func (c storedCallback) wants(ev outbox.Event, f eventFacts) bool {
	return ev.Name == EventDecisionResolved && !ev.OccurredAt.Before(c.CreatedAt) && c.Filter.matches(f)
}

// callbackSet is the org's one record of callbacks (bounded by
// MaxCallbacks, so it is read whole).
type callbackSet struct {
	Callbacks []storedCallback `json:"callbacks"`
}

func (s callbackSet) find(id string) (storedCallback, int) {
	for i, c := range s.Callbacks {
		if c.ID == id {
			return c, i
		}
	}
	return storedCallback{}, -1
}

func readCallbacksTx(ctx context.Context, tx store.Tx) (callbackSet, error) {
	return decodeCallbacks(tx.ArtifactInTx(ctx, callbacksKind, callbacksID))
}

func (s *Service) readCallbacks(ctx context.Context, orgID string) (callbackSet, error) {
	return decodeCallbacks(s.d.Store.Artifact(ctx, orgID, callbacksKind, callbacksID))
}

func decodeCallbacks(rec artifact.Record, err error) (callbackSet, error) {
	if core.IsNotFound(err) {
		return callbackSet{}, nil
	}
	if err != nil {
		return callbackSet{}, core.Translate("read callbacks", err)
	}
	var set callbackSet
	if err := json.Unmarshal(rec.Body, &set); err != nil {
		return callbackSet{}, core.Unavailable("decode callbacks", err)
	}
	return set, nil
}

func writeCallbacks(ctx context.Context, tx store.Tx, set callbackSet, now time.Time) error {
	if set.Callbacks == nil {
		set.Callbacks = []storedCallback{}
	}
	b, err := json.Marshal(set)
	if err != nil {
		return err
	}
	return tx.PutArtifact(ctx, artifact.Record{OrgID: tx.OrgID(), Kind: callbacksKind, ID: callbacksID, Ref: integrationRef,
		CreatedAt: now, Body: b})
}

func callbackSecretContext(orgID, id string) string {
	return secretContextPrefix + orgID + ":" + CallbackPrefix + id
}

// callbackBody is the registration body as received.
type callbackBody struct {
	URL    *string `json:"url"`
	Filter *Filter `json:"filter"`
}

// AddCallback registers a callback URL for the org's decision.resolved
// events, optionally filtered like a WEBHOOK subscription, bound to the
// credential keyHash (tenant.APIKey.Hash; "" binds it to none): once that
// credential is revoked or expires, nothing more is delivered to it. The URL passes
// the outbound client's guard now and again at every delivery; the same
// URL twice is refused (409 CALLBACK_EXISTS), as is one more than
// MaxCallbacks (409 CALLBACK_LIMIT_REACHED). The signing secret is made
// here and answered once; it is kept sealed.
func (s *Service) AddCallback(ctx context.Context, orgID, keyHash string, raw []byte) (NewCallback, error) {
	var b callbackBody
	if err := strictjson.Decode(raw, &b, s.d.JSON); err != nil {
		return NewCallback{}, core.TranslateInput(err)
	}
	var p problems
	switch {
	case b.URL == nil:
		p.add("url", "is required")
	case len(*b.URL) > MaxURLLen:
		p.add("url", "is longer than %d bytes", MaxURLLen)
	default:
		if _, err := s.cfg.Client.CheckURL(*b.URL); err != nil {
			return NewCallback{}, &core.Error{Kind: core.ErrInvalidRequest, Code: CodeDestinationForbidden,
				Detail: "url is not a destination Clearance may call: " + destinationReason(err),
				Fields: []core.FieldError{{Field: "url", Message: destinationReason(err)}}}
		}
	}
	var filter Filter
	if b.Filter != nil {
		filter = *b.Filter
		checkFilter(&p, "filter", &filter)
	}
	if len(p) > 0 {
		return NewCallback{}, &core.Error{Kind: core.ErrInvalidRequest, Code: CodeInvalidCallback,
			Detail: "the callback is not valid: " + p[0].Field + " " + p[0].Message, Fields: p}
	}
	if s.d.Secrets == nil {
		return NewCallback{}, core.New(core.ErrUnavailable, CodeSecretsNotConfigured, "the server has no secrets key, so a signing secret cannot be stored")
	}
	id, err := s.d.IDs.New()
	if err != nil {
		return NewCallback{}, core.Unavailable("id generation", err)
	}
	var raw32 [32]byte
	if _, err := io.ReadFull(s.d.IDs.Rand, raw32[:]); err != nil {
		return NewCallback{}, core.Unavailable("secret generation", err)
	}
	secret := PrefixCallbackSecret + base64.RawURLEncoding.EncodeToString(raw32[:])
	sealed, err := s.d.Secrets.Seal([]byte(secret), callbackSecretContext(orgID, id))
	if err != nil {
		return NewCallback{}, core.Unavailable("seal secret", err)
	}
	now := s.d.Now().UTC()
	cb := storedCallback{ID: id, URL: *b.URL, Filter: filter, Sealed: sealed, CreatedAt: now, KeyHash: keyHash}
	err = s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		set, err := readCallbacksTx(ctx, tx)
		if err != nil {
			return err
		}
		for _, c := range set.Callbacks {
			if c.URL == cb.URL {
				return core.New(core.ErrConflict, CodeCallbackExists, "the URL is registered already, as subscription %s", c.ID)
			}
		}
		if len(set.Callbacks) >= MaxCallbacks {
			return core.New(core.ErrConflict, CodeCallbackLimitReached, "an org has at most %d callback URLs: remove one first", MaxCallbacks)
		}
		set.Callbacks = append(set.Callbacks, cb)
		if err := writeCallbacks(ctx, tx, set, now); err != nil {
			return err
		}
		return outbox.Subscribe(ctx, tx, callbackSubscriber)
	})
	if err != nil {
		return NewCallback{}, core.Translate("register callback", err)
	}
	return NewCallback{Callback: cb.view(true), SigningSecret: secret}, nil
}

// RemoveCallback removes a callback: nothing more is delivered to it (its
// pending deliveries are dropped). Its delivery log stays.
func (s *Service) RemoveCallback(ctx context.Context, orgID, id string) error {
	if !core.ValidID(id) {
		return errNoCallback()
	}
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		set, err := readCallbacksTx(ctx, tx)
		if err != nil {
			return err
		}
		_, i := set.find(id)
		if i < 0 {
			return errNoCallback()
		}
		set.Callbacks = append(set.Callbacks[:i:i], set.Callbacks[i+1:]...)
		if err := writeCallbacks(ctx, tx, set, tx.Now()); err != nil {
			return err
		}
		if len(set.Callbacks) == 0 {
			return outbox.Unsubscribe(ctx, tx, callbackSubscriber)
		}
		return nil
	})
	if err != nil {
		return core.Translate("remove callback", err)
	}
	return nil
}

// Callbacks lists the org's callbacks, oldest first.
func (s *Service) Callbacks(ctx context.Context, orgID string) ([]Callback, error) {
	// An org that does not exist is ORG_NOT_FOUND, as for the writes.
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return nil, err
	}
	set, err := s.readCallbacks(ctx, orgID)
	if err != nil {
		return nil, err
	}
	out := make([]Callback, 0, len(set.Callbacks))
	for _, c := range set.Callbacks {
		active, err := s.live(ctx, orgID, c)
		if err != nil {
			return nil, err
		}
		out = append(out, c.view(active))
	}
	return out, nil
}

// HasCallback is nil when the org has the callback, else CALLBACK_NOT_FOUND.
func (s *Service) HasCallback(ctx context.Context, orgID, id string) error {
	if !core.ValidID(id) {
		return errNoCallback()
	}
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return err
	}
	set, err := s.readCallbacks(ctx, orgID)
	if err != nil {
		return err
	}
	if _, i := set.find(id); i < 0 {
		return errNoCallback()
	}
	return nil
}

func errNoCallback() error {
	return core.New(core.ErrNotFound, CodeCallbackNotFound, "the org has no callback with that subscription id")
}

// isCallback reports whether a destination name is a callback's, and its id.
func isCallback(destination string) (string, bool) {
	return strings.CutPrefix(destination, CallbackPrefix)
}
