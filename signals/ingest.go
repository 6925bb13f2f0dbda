package signals

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// Delivery is one POST to a connector's ingress, as received.
type Delivery struct {
	ConnectorID string
	// Secret is the x-webhook-secret header; "" when it was absent or sent
	// more than once.
	Secret string
	// WebhookID, WebhookTimestamp and WebhookSignature are the Standard
	// Webhooks headers ("" when absent). WebhookID also makes an unsigned
	// delivery processed once.
	WebhookID, WebhookTimestamp, WebhookSignature string
	// Body is the request body exactly as received: the signature covers it.
	Body []byte
}

// Receipt answers a delivery.
type Receipt struct {
	// Status is "accepted", or "duplicate" for a webhook-id the connector
	// already delivered (nothing new was stored).
	Status     string `json:"status"`
	DeliveryID string `json:"delivery_id"`
	Events     int    `json:"events"` // events stored by this request
	ReceivedAt string `json:"received_at"`
}

// Receipt statuses.
const (
	ReceiptAccepted  = "accepted"
	ReceiptDuplicate = "duplicate"
)

// delivery is a delivery as ledgered (its digest) and as its replay record.
type delivery struct {
	DeliveryID  string     `json:"delivery_id"`
	ConnectorID string     `json:"connector_id"`
	WebhookID   string     `json:"webhook_id,omitempty"`
	Signed      bool       `json:"signed"`
	BodyDigest  string     `json:"body_digest"`
	ReceivedAt  string     `json:"received_at"`
	Events      []eventRef `json:"events"`
}

// eventRef names one stored event of a delivery.
type eventRef struct {
	EventID    string `json:"event_id"`
	Type       string `json:"type"`
	Timestamp  string `json:"timestamp"`
	DataDigest string `json:"data_digest"`
}

// storedSignal is one event as stored (and as a type's latest).
type storedSignal struct {
	EventID     string          `json:"event_id"`
	Type        string          `json:"type"`
	Timestamp   string          `json:"timestamp"`
	ReceivedAt  string          `json:"received_at"`
	ConnectorID string          `json:"connector_id"`
	DeliveryID  string          `json:"delivery_id"`
	DataDigest  string          `json:"data_digest"`
	Data        json.RawMessage `json:"data"` // canonical JSON
	at          time.Time       // Timestamp parsed
}

// typeIndex is the org's list of signal types, sorted.
type typeIndex struct {
	Types []string `json:"types"`
}

type wireBody struct {
	Events []wireEvent `json:"events"`
}

type wireEvent struct {
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

var errUnauthorized = core.New(core.ErrUnauthenticated, CodeWebhookSecretInvalid, "the connector or its webhook secret is not valid")

// dummyHash stands in for the stored hash when there is no connector, so
// that every refusal costs the same hashing and comparing.
var dummyHash = sha256.Sum256([]byte(SecretPrefix + "no connector"))

// Ingest authenticates a delivery, checks its signature when the
// connector requires one, validates its events and stores them, with the
// latest view, the replay record and a ledger entry, in one unit. Nothing
// is stored for a refused delivery, nor for a replayed webhook-id.
func (s *Service) Ingest(ctx context.Context, d Delivery) (Receipt, error) {
	now := s.d.Now()
	c, err := s.authenticate(ctx, d)
	if err != nil {
		return Receipt{}, err
	}
	if c.RequireSignature {
		if err := s.verifySignature(c, d, now); err != nil {
			return Receipt{}, err
		}
	} else if d.WebhookID != "" && !validWebhookID(d.WebhookID) {
		return Receipt{}, core.Invalid(CodeInvalidWebhookID, "webhook-id", "webhook-id must be 1 to %d visible ASCII characters", MaxWebhookIDLen)
	}
	events, err := s.decode(d.Body, now)
	if err != nil {
		return Receipt{}, err
	}
	ids, err := s.newIDs(len(events) + 1)
	if err != nil {
		return Receipt{}, core.Unavailable("id generation", err)
	}
	received := core.Format(now)
	dl := delivery{DeliveryID: ids[0], ConnectorID: c.ConnectorID, WebhookID: d.WebhookID, Signed: c.RequireSignature,
		BodyDigest: canon.Digest(d.Body), ReceivedAt: received, Events: make([]eventRef, len(events))}
	for i := range events {
		e := &events[i]
		e.EventID, e.ReceivedAt, e.ConnectorID, e.DeliveryID = ids[i+1], received, c.ConnectorID, dl.DeliveryID
		dl.Events[i] = eventRef{EventID: e.EventID, Type: e.Type, Timestamp: e.Timestamp, DataDigest: e.DataDigest}
	}
	var out Receipt
	err = s.d.Store.Update(ctx, c.OrgID, func(tx store.Tx) error {
		out = Receipt{}
		var err error
		out, err = s.store(ctx, tx, c.ConnectorID, dl, events, now)
		return err
	})
	if err != nil {
		return Receipt{}, core.Translate("store signals", err)
	}
	return out, nil
}

// store writes a delivery in its org's transaction.
func (s *Service) store(ctx context.Context, tx store.Tx, connectorID string, dl delivery, events []storedSignal, now time.Time) (Receipt, error) {
	// Revoked since it was authenticated: the same refusal.
	r, err := tx.ArtifactInTx(ctx, kindConnector, connectorID)
	if err != nil {
		if core.IsNotFound(err) {
			return Receipt{}, errUnauthorized
		}
		return Receipt{}, err
	}
	var c connectorRecord
	if err := json.Unmarshal(r.Body, &c); err != nil || c.Status != StatusActive {
		return Receipt{}, errUnauthorized
	}
	replayID := connectorID + "/" + dl.WebhookID
	if dl.WebhookID != "" {
		prior, err := tx.ArtifactInTx(ctx, kindDelivery, replayID)
		switch {
		case err == nil:
			var p delivery
			if err := json.Unmarshal(prior.Body, &p); err != nil {
				return Receipt{}, err
			}
			return Receipt{Status: ReceiptDuplicate, DeliveryID: p.DeliveryID, ReceivedAt: p.ReceivedAt}, nil
		case !core.IsNotFound(err):
			return Receipt{}, err
		}
	}
	var index *typeIndex // read once, when a delivery brings a new type
	for i := range events {
		e := &events[i]
		body, err := json.Marshal(e)
		if err != nil {
			return Receipt{}, err
		}
		if err := tx.PutArtifact(ctx, artifact.Record{OrgID: c.OrgID, Kind: kindEvent, ID: e.EventID, Ref: e.Type,
			CreatedAt: now, Body: body}); err != nil {
			return Receipt{}, err
		}
		latest, err := tx.ArtifactInTx(ctx, kindLatest, e.Type)
		switch {
		case err == nil:
			var old storedSignal
			if err := json.Unmarshal(latest.Body, &old); err != nil {
				return Receipt{}, err
			}
			oldAt, err := time.Parse(time.RFC3339Nano, old.Timestamp)
			if err == nil && e.at.Before(oldAt) {
				continue // a late arrival: kept, but not the latest
			}
		case core.IsNotFound(err):
			if index == nil {
				if index, err = readIndex(ctx, tx); err != nil {
					return Receipt{}, err
				}
			}
			if len(index.Types) >= MaxTypes {
				return Receipt{}, core.New(core.ErrConflict, CodeTypesExhausted,
					"the organization has %d signal types, the most it may have; type %q would be one more", MaxTypes, e.Type)
			}
			index.Types = append(index.Types, e.Type)
			slices.Sort(index.Types)
		default:
			return Receipt{}, err
		}
		if err := tx.PutArtifact(ctx, artifact.Record{OrgID: c.OrgID, Kind: kindLatest, ID: e.Type, Ref: refLatest,
			CreatedAt: now, Body: body}); err != nil {
			return Receipt{}, err
		}
	}
	if index != nil {
		body, err := json.Marshal(index)
		if err != nil {
			return Receipt{}, err
		}
		if err := tx.PutArtifact(ctx, artifact.Record{OrgID: c.OrgID, Kind: kindTypes, ID: idTypes, CreatedAt: now, Body: body}); err != nil {
			return Receipt{}, err
		}
	}
	if dl.WebhookID != "" {
		body, err := json.Marshal(dl)
		if err != nil {
			return Receipt{}, err
		}
		if err := tx.PutArtifact(ctx, artifact.Record{OrgID: c.OrgID, Kind: kindDelivery, ID: replayID, Ref: connectorID,
			CreatedAt: now, Body: body}); err != nil {
			return Receipt{}, err
		}
	}
	if err := core.AppendRecord(ctx, tx, ledger.KindSignalsReceived, dl.DeliveryID, dl, now); err != nil {
		return Receipt{}, err
	}
	return Receipt{Status: ReceiptAccepted, DeliveryID: dl.DeliveryID, Events: len(events), ReceivedAt: dl.ReceivedAt}, nil
}

func readIndex(ctx context.Context, tx store.Tx) (*typeIndex, error) {
	r, err := tx.ArtifactInTx(ctx, kindTypes, idTypes)
	if core.IsNotFound(err) {
		return &typeIndex{}, nil
	}
	if err != nil {
		return nil, err
	}
	var ix typeIndex
	return &ix, json.Unmarshal(r.Body, &ix)
}

// authenticate finds the delivery's connector and checks its secret. Every
// refusal is errUnauthorized, after the same hashing and comparing.
func (s *Service) authenticate(ctx context.Context, d Delivery) (connectorRecord, error) {
	got := sha256.Sum256([]byte(d.Secret))
	c, found, err := s.lookup(ctx, d.ConnectorID)
	if err != nil {
		return connectorRecord{}, err
	}
	want := dummyHash
	if found && c.Status == StatusActive {
		if sum, err := canon.ParseDigest(c.SecretHash); err == nil {
			want = sum
		} else {
			found = false
		}
	}
	match := subtle.ConstantTimeCompare(got[:], want[:]) == 1
	if !found || c.Status != StatusActive || d.Secret == "" || !match {
		return connectorRecord{}, errUnauthorized
	}
	return c, nil
}

// lookup reads a connector by id through the platform org's pointer; the
// org's record is the authority. found is false for an id that names no
// connector; err is a store failure (503).
func (s *Service) lookup(ctx context.Context, id string) (connectorRecord, bool, error) {
	if !core.ValidID(id) {
		return connectorRecord{}, false, nil
	}
	p, err := s.d.Store.Artifact(ctx, tenant.PlatformOrgID, kindConnectorOrg, id)
	if core.IsNotFound(err) {
		return connectorRecord{}, false, nil
	}
	if err != nil {
		return connectorRecord{}, false, core.Unavailable("read connector", err)
	}
	var ptr connectorPointer
	if err := json.Unmarshal(p.Body, &ptr); err != nil || !core.ValidID(ptr.OrgID) {
		return connectorRecord{}, false, core.Unavailable("read connector", errors.New("malformed connector pointer"))
	}
	r, err := s.d.Store.Artifact(ctx, ptr.OrgID, kindConnector, id)
	if core.IsNotFound(err) {
		return connectorRecord{}, false, nil
	}
	if err != nil {
		return connectorRecord{}, false, core.Unavailable("read connector", err)
	}
	var c connectorRecord
	if err := json.Unmarshal(r.Body, &c); err != nil || c.OrgID != ptr.OrgID || c.ConnectorID != id {
		return connectorRecord{}, false, core.Unavailable("read connector", errors.New("malformed connector record"))
	}
	return c, true, nil
}

// verifySignature checks a Standard Webhooks signature: webhook-signature
// holds space-separated "v1,<base64>" entries, one of which must be
// HMAC-SHA256(key, id + "." + timestamp + "." + body), where key is the
// base64-decoded secret after "whsec_".
func (s *Service) verifySignature(c connectorRecord, d Delivery, now time.Time) error {
	bad := func(detail string) error {
		return core.New(core.ErrUnauthenticated, CodeSignatureInvalid, "%s", detail)
	}
	if d.WebhookID == "" || d.WebhookTimestamp == "" || d.WebhookSignature == "" {
		return bad("the connector requires signed deliveries: webhook-id, webhook-timestamp and webhook-signature are needed")
	}
	if !validWebhookID(d.WebhookID) {
		return bad("webhook-id must be 1 to 256 visible ASCII characters")
	}
	ts, err := strconv.ParseInt(d.WebhookTimestamp, 10, 64)
	if err != nil || len(d.WebhookTimestamp) > 12 {
		return bad("webhook-timestamp must be whole seconds since the Unix epoch")
	}
	if skew := now.Sub(time.Unix(ts, 0)); skew > SignatureTolerance || skew < -SignatureTolerance {
		return core.New(core.ErrUnauthenticated, CodeTimestampOutOfTolerance,
			"webhook-timestamp is more than %s away from now", SignatureTolerance)
	}
	if s.d.Secrets == nil {
		return core.New(core.ErrUnavailable, CodeSecretsNotConfigured, "the connector's secret cannot be opened: no secrets key is configured")
	}
	secret, err := s.d.Secrets.Open(c.SealedSecret, sealContext(c.OrgID, c.ConnectorID))
	if err != nil {
		return core.Unavailable("open connector secret", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(string(secret), SecretPrefix))
	if err != nil {
		return core.Unavailable("open connector secret", err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(d.WebhookID + "." + d.WebhookTimestamp + "."))
	mac.Write(d.Body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(d.WebhookSignature) {
		v, b64, ok := strings.Cut(sig, ",")
		if !ok || v != "v1" {
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return bad("no v1 signature of webhook-signature verifies")
}

func validWebhookID(id string) bool { return len(id) <= MaxWebhookIDLen && core.ValidToken(id) }

// decode validates a delivery's body and returns its events, data in
// canonical JSON.
func (s *Service) decode(body []byte, now time.Time) ([]storedSignal, error) {
	var w wireBody
	if err := strictjson.Decode(body, &w, s.d.JSON); err != nil {
		return nil, core.TranslateInput(err)
	}
	if len(w.Events) == 0 || len(w.Events) > MaxEvents {
		return nil, core.Invalid(CodeInvalidBatch, "events", "events must hold 1 to %d events", MaxEvents)
	}
	out := make([]storedSignal, len(w.Events))
	for i, e := range w.Events {
		at := func(f string) string { return "events[" + strconv.Itoa(i) + "]." + f }
		if !policy.ValidSignalType(e.Type) {
			return nil, core.Invalid(CodeInvalidType, at("type"), "type must be %s", policy.SignalTypeRule)
		}
		ts, err := time.Parse(time.RFC3339Nano, e.Timestamp)
		if err != nil {
			return nil, core.Invalid(CodeInvalidTimestamp, at("timestamp"), "timestamp must be an RFC 3339 date-time with a time zone")
		}
		if ts.After(now.Add(MaxEventLead)) {
			return nil, core.Invalid(CodeInvalidTimestamp, at("timestamp"), "timestamp is more than %s in the future", MaxEventLead)
		}
		raw := bytes.TrimSpace(e.Data)
		if len(raw) == 0 || raw[0] != '{' {
			return nil, core.Invalid(CodeInvalidData, at("data"), "data must be a JSON object")
		}
		data, err := canon.Transform(raw)
		if err != nil {
			return nil, core.Invalid(CodeInvalidData, at("data"), "data cannot be canonicalized: %v", err)
		}
		if len(data) > MaxDataBytes {
			return nil, core.Invalid(CodeInvalidData, at("data"), "data is %d bytes of canonical JSON, more than %d", len(data), MaxDataBytes)
		}
		out[i] = storedSignal{Type: e.Type, Timestamp: core.Format(ts), DataDigest: canon.Digest(data), Data: data, at: ts.UTC()}
	}
	return out, nil
}

func (s *Service) newIDs(n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		var err error
		if ids[i], err = s.d.IDs.New(); err != nil {
			return nil, err
		}
	}
	return ids, nil
}
