package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/outbound"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/outbox"
	"github.com/clearancehq/clearance/store"
)

// Provider is the integration this feature connects: an HTTPS endpoint
// that receives signed events.
const Provider = "WEBHOOK"

// Events a subscription may name. The spec shows decisioning.v2.ran as a
// subscription's event_name; it is the same fan-out as decision.resolved.
const (
	EventDecisionResolved = "decision.resolved"
	EventDecisioningRan   = "decisioning.v2.ran"
)

// Limits of the connect body.
const (
	MaxURLLen           = 2048
	MaxLabelLen         = 200 // provider_name, workflow_id, filter values
	MinSecretLen        = 16
	MaxSecretLen        = 512
	MaxSubscriptions    = 10
	MaxFilterValues     = 50
	DefaultRotation     = 24 * time.Hour
	integrationKind     = "webhook.integration"
	integrationRef      = "integrations"
	statusActive        = "active"
	secretContextPrefix = "webhook-signing-secret:"
)

var (
	outcomes = []string{"ALLOW", "ESCALATE", "REVIEW_REQUIRED", "BLOCK"}
	modes    = []string{"SHADOW", "ENFORCEMENT"}
)

// Destination is where an integration delivers: its connect body's config.
type Destination struct {
	EndpointURL  string `json:"endpoint_url"`
	ProviderName string `json:"provider_name,omitempty"`
	// WorkflowID, when set, limits the integration to decisions of that
	// workflow_key (on top of each subscription's filter).
	WorkflowID string `json:"workflow_id,omitempty"`
}

// Subscription is one event the integration receives, when enabled and
// its filter matches.
type Subscription struct {
	EventName string `json:"event_name"`
	IsEnabled bool   `json:"is_enabled"`
	Filter    Filter `json:"filter"`
}

// Filter selects the events of a subscription: every member that is
// given must contain the event's value (members are ANDed, the values of
// one member ORed); the empty filter matches every event.
type Filter struct {
	Outcomes      []string `json:"outcomes,omitempty"`
	Modes         []string `json:"modes,omitempty"`
	WorkflowKeys  []string `json:"workflow_keys,omitempty"`
	DecisionTypes []string `json:"decision_types,omitempty"`
}

// Signing describes the signing secrets in use, never the secrets.
type Signing struct {
	// ActiveSecrets is how many secrets sign each delivery: 1, or 2 while
	// a replaced secret is still honoured.
	ActiveSecrets int `json:"active_secrets"`
	// PreviousSecretExpiresAt is when the replaced secret stops signing.
	PreviousSecretExpiresAt string `json:"previous_secret_expires_at,omitempty"`
}

// Integration is an org's WEBHOOK integration, as answered.
type Integration struct {
	IntegrationID string         `json:"integration_id"`
	Provider      string         `json:"provider"`
	OrgID         string         `json:"org_id"`
	Status        string         `json:"status"`
	Config        Destination    `json:"config"`
	Subscriptions []Subscription `json:"subscriptions"`
	Signing       Signing        `json:"signing"`
	CreatedAt     string         `json:"created_at"`
	UpdatedAt     string         `json:"updated_at"`
	// Created is true when the connect created the integration.
	Created bool `json:"created"`
}

// sealedSecret is a signing secret at rest.
type sealedSecret struct {
	Sealed    string    `json:"sealed"`
	AddedAt   time.Time `json:"added_at"`
	RetiresAt time.Time `json:"retires_at,omitzero"`
}

// stored is the integration record.
type stored struct {
	OrgID         string         `json:"org_id"`
	Config        Destination    `json:"config"`
	Subscriptions []Subscription `json:"subscriptions"`
	Secrets       []sealedSecret `json:"secrets"`
	CreatedAt     time.Time      `json:"created_at"`
	UpdatedAt     time.Time      `json:"updated_at"`
}

// active returns the secrets that still sign at now, newest first.
func (r *stored) active(now time.Time) []sealedSecret {
	var out []sealedSecret
	for _, s := range r.Secrets {
		if s.RetiresAt.IsZero() || now.Before(s.RetiresAt) {
			out = append(out, s)
		}
	}
	return out
}

func (r *stored) view(now time.Time, created bool) Integration {
	in := Integration{IntegrationID: Provider, Provider: Provider, OrgID: r.OrgID, Status: statusActive, Config: r.Config,
		Subscriptions: r.Subscriptions, CreatedAt: r.CreatedAt.Format(core.TimeFormat), UpdatedAt: r.UpdatedAt.Format(core.TimeFormat),
		Created: created}
	act := r.active(now)
	in.Signing.ActiveSecrets = len(act)
	for _, s := range act {
		if !s.RetiresAt.IsZero() {
			in.Signing.PreviousSecretExpiresAt = s.RetiresAt.Format(core.TimeFormat)
		}
	}
	return in
}

// connectBody is the connect request as received; pointers tell an
// absent member from an empty one.
type connectBody struct {
	Config *struct {
		EndpointURL  *string `json:"endpoint_url"`
		ProviderName *string `json:"provider_name"`
		WorkflowID   *string `json:"workflow_id"`
	} `json:"config"`
	Credentials *struct {
		WebhookSecret *string `json:"webhook_secret"`
	} `json:"credentials"`
	Subscriptions *[]struct {
		EventName *string `json:"event_name"`
		IsEnabled *bool   `json:"is_enabled"`
		Filter    *Filter `json:"filter"`
	} `json:"subscriptions"`
}

// connectRequest is a validated connect body.
type connectRequest struct {
	config        Destination
	secret        []byte // nil: keep the current one
	subscriptions []Subscription
	subsGiven     bool
}

type problems []core.FieldError

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, core.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (s *Service) decodeConnect(raw []byte) (connectRequest, error) {
	var b connectBody
	if err := strictjson.Decode(raw, &b, s.d.JSON); err != nil {
		return connectRequest{}, core.TranslateInput(err)
	}
	var req connectRequest
	var p problems
	if b.Config == nil || b.Config.EndpointURL == nil {
		p.add("config.endpoint_url", "is required")
	} else {
		req.config.EndpointURL = *b.Config.EndpointURL
		if len(req.config.EndpointURL) > MaxURLLen {
			p.add("config.endpoint_url", "is longer than %d bytes", MaxURLLen)
		} else if _, err := s.cfg.Client.CheckURL(req.config.EndpointURL); err != nil {
			return connectRequest{}, &core.Error{Kind: core.ErrInvalidRequest, Code: CodeDestinationForbidden,
				Detail: "config.endpoint_url is not a destination Clearance may call: " + destinationReason(err),
				Fields: []core.FieldError{{Field: "config.endpoint_url", Message: destinationReason(err)}}}
		}
	}
	if b.Config != nil {
		req.config.ProviderName = label(&p, "config.provider_name", b.Config.ProviderName)
		req.config.WorkflowID = label(&p, "config.workflow_id", b.Config.WorkflowID)
	}
	if b.Credentials != nil && b.Credentials.WebhookSecret != nil {
		sec := *b.Credentials.WebhookSecret
		if len(sec) < MinSecretLen || len(sec) > MaxSecretLen || strings.IndexFunc(sec, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
			p.add("credentials.webhook_secret", "must be %d to %d visible ASCII characters", MinSecretLen, MaxSecretLen)
		} else {
			req.secret = []byte(sec)
		}
	}
	if b.Subscriptions != nil {
		req.subsGiven = true
		subs := *b.Subscriptions
		if len(subs) > MaxSubscriptions {
			p.add("subscriptions", "at most %d", MaxSubscriptions)
		}
		for i, sb := range subs {
			f := fmt.Sprintf("subscriptions[%d]", i)
			var sub Subscription
			switch {
			case sb.EventName == nil:
				p.add(f+".event_name", "is required")
			case *sb.EventName != EventDecisionResolved && *sb.EventName != EventDecisioningRan:
				p.add(f+".event_name", "must be %s or %s", EventDecisionResolved, EventDecisioningRan)
			default:
				sub.EventName = *sb.EventName
			}
			if sb.IsEnabled == nil {
				p.add(f+".is_enabled", "is required")
			} else {
				sub.IsEnabled = *sb.IsEnabled
			}
			if sb.Filter != nil {
				sub.Filter = *sb.Filter
				checkFilter(&p, f+".filter", &sub.Filter)
			}
			req.subscriptions = append(req.subscriptions, sub)
		}
	}
	if len(p) > 0 {
		return connectRequest{}, &core.Error{Kind: core.ErrInvalidRequest, Code: CodeInvalidIntegration,
			Detail: "the WEBHOOK integration is not valid: " + p[0].Field + " " + p[0].Message, Fields: p}
	}
	return req, nil
}

func label(p *problems, field string, v *string) string {
	if v == nil {
		return ""
	}
	if len(*v) > MaxLabelLen || !core.ValidText(*v) {
		p.add(field, "must be at most %d characters of text without control characters", MaxLabelLen)
		return ""
	}
	return *v
}

func checkFilter(p *problems, field string, f *Filter) {
	for _, m := range []struct {
		name   string
		values []string
		allow  []string
	}{{"outcomes", f.Outcomes, outcomes}, {"modes", f.Modes, modes}, {"workflow_keys", f.WorkflowKeys, nil}, {"decision_types", f.DecisionTypes, nil}} {
		if len(m.values) > MaxFilterValues {
			p.add(field+"."+m.name, "at most %d values", MaxFilterValues)
			continue
		}
		for i, v := range m.values {
			switch {
			case m.allow != nil && !slices.Contains(m.allow, v):
				p.add(fmt.Sprintf("%s.%s[%d]", field, m.name, i), "must be one of %s", strings.Join(m.allow, ", "))
			case m.allow == nil && (v == "" || len(v) > MaxLabelLen || !core.ValidText(v)):
				p.add(fmt.Sprintf("%s.%s[%d]", field, m.name, i), "must be 1 to %d characters of text", MaxLabelLen)
			}
		}
	}
}

// destinationReason says why the outbound client refuses a URL.
func destinationReason(err error) string {
	switch {
	case errors.Is(err, outbound.ErrBlockedDestination):
		return "it names a loopback, private, link-local, metadata, multicast or unspecified address (or a local name)"
	default:
		return "it must be an absolute https URL without userinfo (http only with --allow-private-destinations)"
	}
}

// Connect creates or updates the org's WEBHOOK integration from a connect
// body: its endpoint, subscriptions and signing secret. A new secret
// replaces the current one, which keeps signing beside it for
// Config.Rotation so that receivers can switch without losing deliveries.
func (s *Service) Connect(ctx context.Context, orgID string, body []byte) (Integration, error) {
	req, err := s.decodeConnect(body)
	if err != nil {
		return Integration{}, err
	}
	if s.d.Secrets == nil {
		return Integration{}, core.New(core.ErrUnavailable, CodeSecretsNotConfigured, "the server has no secrets key, so a signing secret cannot be stored")
	}
	var sealed string
	if req.secret != nil {
		if sealed, err = s.d.Secrets.Seal(req.secret, secretContext(orgID)); err != nil {
			return Integration{}, core.Unavailable("seal secret", err)
		}
	}
	now := s.d.Now().UTC()
	var out Integration
	err = s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		r, found, err := readIntegrationTx(ctx, tx)
		if err != nil {
			return err
		}
		if !found {
			if req.secret == nil {
				return core.Invalid(CodeWebhookSecretRequired, "credentials.webhook_secret", "the first connect must give credentials.webhook_secret")
			}
			r = stored{OrgID: orgID, CreatedAt: now, Subscriptions: []Subscription{{EventName: EventDecisionResolved, IsEnabled: true}}}
		}
		r.Config, r.UpdatedAt = req.config, now
		if req.subsGiven {
			r.Subscriptions = req.subscriptions
		}
		if r.Subscriptions == nil {
			r.Subscriptions = []Subscription{}
		}
		if req.secret != nil {
			same, err := s.sameSecret(orgID, r.active(now), req.secret)
			if err != nil {
				return err
			}
			if !same {
				r.Secrets = rotate(r.active(now), sealed, now, s.cfg.Rotation)
			}
		}
		out = r.view(now, !found)
		if err := writeIntegration(ctx, tx, &r); err != nil {
			return err
		}
		// Decisions write events only while something is subscribed.
		if r.enabled() {
			return outbox.Subscribe(ctx, tx, subscriber)
		}
		return outbox.Unsubscribe(ctx, tx, subscriber)
	})
	if err != nil {
		return Integration{}, core.Translate("connect webhook integration", err)
	}
	return out, nil
}

// sameSecret reports whether secret is the newest active one (a connect
// that repeats its secret does not rotate).
func (s *Service) sameSecret(orgID string, act []sealedSecret, secret []byte) (bool, error) {
	if len(act) == 0 {
		return false, nil
	}
	cur, err := s.d.Secrets.Open(act[len(act)-1].Sealed, secretContext(orgID))
	if err != nil {
		return false, core.Unavailable("open secret", err)
	}
	return bytes.Equal(cur, secret), nil
}

// rotate keeps the newest active secret for rotation beside the new one.
func rotate(act []sealedSecret, sealed string, now time.Time, rotation time.Duration) []sealedSecret {
	out := []sealedSecret{}
	if n := len(act); n > 0 {
		prev := act[n-1]
		prev.RetiresAt = now.Add(rotation)
		out = append(out, prev)
	}
	return append(out, sealedSecret{Sealed: sealed, AddedAt: now})
}

func secretContext(orgID string) string { return secretContextPrefix + orgID + ":" + Provider }

// Get returns the org's WEBHOOK integration.
func (s *Service) Get(ctx context.Context, orgID string) (Integration, error) {
	r, found, err := s.read(ctx, orgID)
	if err != nil {
		return Integration{}, err
	}
	if !found {
		return Integration{}, notConnected()
	}
	return r.view(s.d.Now().UTC(), false), nil
}

// Delete removes the org's WEBHOOK integration and its secrets: nothing is
// delivered to it any more (pending deliveries are dropped).
func (s *Service) Delete(ctx context.Context, orgID string) error {
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		_, found, err := readIntegrationTx(ctx, tx)
		if err != nil {
			return err
		}
		if !found {
			return notConnected()
		}
		if err := outbox.Unsubscribe(ctx, tx, subscriber); err != nil {
			return err
		}
		// The record stays, emptied: artifacts are never deleted.
		return tx.PutArtifact(ctx, artifact.Record{OrgID: orgID, Kind: integrationKind, ID: Provider, Ref: integrationRef,
			CreatedAt: s.d.Now(), Body: []byte(deletedBody)})
	})
	if err != nil {
		return core.Translate("delete webhook integration", err)
	}
	return nil
}

// deletedBody is the body of a deleted integration's record.
const deletedBody = `{}`

// subscriber is the outbox subscriber name of an org's WEBHOOK
// integration: subscribed while it has an enabled subscription.
const subscriber = "webhook"

// enabled reports whether r receives any event.
func (r *stored) enabled() bool {
	for _, sub := range r.Subscriptions {
		if sub.IsEnabled {
			return true
		}
	}
	return false
}

func notConnected() error {
	return core.New(core.ErrNotFound, CodeIntegrationNotFound, "the org has no WEBHOOK integration")
}

func (s *Service) read(ctx context.Context, orgID string) (stored, bool, error) {
	rec, err := s.d.Store.Artifact(ctx, orgID, integrationKind, Provider)
	return decodeIntegration(rec, err)
}

func readIntegrationTx(ctx context.Context, tx store.Tx) (stored, bool, error) {
	rec, err := tx.ArtifactInTx(ctx, integrationKind, Provider)
	return decodeIntegration(rec, err)
}

func decodeIntegration(rec artifact.Record, err error) (stored, bool, error) {
	if core.IsNotFound(err) {
		return stored{}, false, nil
	}
	if err != nil {
		return stored{}, false, core.Translate("read webhook integration", err)
	}
	var r stored
	if err := json.Unmarshal(rec.Body, &r); err != nil {
		return stored{}, false, core.Unavailable("decode webhook integration", err)
	}
	if r.OrgID == "" { // deleted
		return stored{}, false, nil
	}
	return r, true, nil
}

func writeIntegration(ctx context.Context, tx store.Tx, r *stored) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return tx.PutArtifact(ctx, artifact.Record{OrgID: r.OrgID, Kind: integrationKind, ID: Provider, Ref: integrationRef,
		CreatedAt: r.CreatedAt, Body: b})
}
