package signals

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// NewConnector is the request to make a connector.
type NewConnector struct {
	Name string `json:"name"`
	// RequireSignature makes the connector accept only deliveries signed
	// the Standard Webhooks way with its secret.
	RequireSignature bool `json:"require_signature"`
}

// Connector is a connector as its org sees it: never its secret.
type Connector struct {
	ConnectorID      string `json:"connector_id"`
	Name             string `json:"name"`
	RequireSignature bool   `json:"require_signature"`
	Status           string `json:"status"`
	WebhookPath      string `json:"webhook_path"`
	CreatedAt        string `json:"created_at"`
	RevokedAt        string `json:"revoked_at,omitempty"`
}

// CreatedConnector is the answer to CreateConnector: the one time the
// secret is shown.
type CreatedConnector struct {
	Connector
	WebhookSecret string `json:"webhook_secret"`
}

// connectorRecord is a connector as stored in its org.
type connectorRecord struct {
	ConnectorID      string `json:"connector_id"`
	OrgID            string `json:"org_id"`
	Name             string `json:"name"`
	RequireSignature bool   `json:"require_signature"`
	Status           string `json:"status"`
	CreatedAt        string `json:"created_at"`
	RevokedAt        string `json:"revoked_at,omitempty"`
	// SecretHash is canon.Digest of the secret; SealedSecret the secret
	// sealed for HMAC checks (signing connectors only). Both go on revoke.
	SecretHash   string `json:"secret_hash,omitempty"`
	SealedSecret string `json:"sealed_secret,omitempty"`
}

// connectorEvent is the ledgered form of a connector's creation or
// revocation: what it is, never its secret.
type connectorEvent struct {
	ConnectorID      string `json:"connector_id"`
	Name             string `json:"name"`
	RequireSignature bool   `json:"require_signature"`
	Status           string `json:"status"`
	At               string `json:"at"`
}

// connectorPointer is the platform org's record of which org a connector
// belongs to.
type connectorPointer struct {
	OrgID string `json:"org_id"`
}

func (r connectorRecord) public() Connector {
	return Connector{ConnectorID: r.ConnectorID, Name: r.Name, RequireSignature: r.RequireSignature, Status: r.Status,
		WebhookPath: WebhookPathPrefix + r.ConnectorID, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt}
}

// sealContext names the record a sealed secret belongs to.
func sealContext(orgID, connectorID string) string {
	return "signals/connector/" + orgID + "/" + connectorID
}

// CreateConnector makes a connector of orgID and returns it with its
// secret, shown this once. The org's record commits (with its ledger
// entry) before the pointer the ingress finds it by; should the pointer
// not be written, the answer is 503 and the connector, never shown a
// secret, receives nothing.
func (s *Service) CreateConnector(ctx context.Context, orgID string, req NewConnector) (CreatedConnector, error) {
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return CreatedConnector{}, err
	}
	name, err := checkName(req.Name)
	if err != nil {
		return CreatedConnector{}, err
	}
	if req.RequireSignature && s.d.Secrets == nil {
		return CreatedConnector{}, core.New(core.ErrUnavailable, CodeSecretsNotConfigured,
			"a connector that requires signatures needs a secrets key, and none is configured")
	}
	id, err := s.d.IDs.New()
	if err != nil {
		return CreatedConnector{}, core.Unavailable("id generation", err)
	}
	secret, err := newSecret(s.d.IDs.Rand)
	if err != nil {
		return CreatedConnector{}, core.Unavailable("secret generation", err)
	}
	now := core.Format(s.d.Now())
	rec := connectorRecord{ConnectorID: id, OrgID: orgID, Name: name, RequireSignature: req.RequireSignature,
		Status: StatusActive, CreatedAt: now, SecretHash: canon.Digest([]byte(secret))}
	if req.RequireSignature {
		if rec.SealedSecret, err = s.d.Secrets.Seal([]byte(secret), sealContext(orgID, id)); err != nil {
			return CreatedConnector{}, core.Unavailable("seal secret", err)
		}
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return CreatedConnector{}, core.Unavailable("encode connector", err)
	}
	at := s.d.Now()
	err = s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		if err := countConnector(ctx, tx, at); err != nil {
			return err
		}
		if err := tx.PutArtifact(ctx, artifact.Record{OrgID: orgID, Kind: kindConnector, ID: id, Ref: refConnector,
			CreatedAt: at, Body: body}); err != nil {
			return err
		}
		return core.AppendRecord(ctx, tx, ledger.KindSignalConnectorCreated, id, rec.event(), at)
	})
	if err != nil {
		return CreatedConnector{}, core.Translate("create connector", err)
	}
	pointer, _ := json.Marshal(connectorPointer{OrgID: orgID})
	err = s.d.Store.Backend.Update(ctx, tenant.PlatformOrgID, func(tx store.Tx) error {
		return tx.PutArtifact(ctx, artifact.Record{OrgID: tenant.PlatformOrgID, Kind: kindConnectorOrg, ID: id,
			CreatedAt: at, Body: pointer})
	})
	if err != nil {
		return CreatedConnector{}, core.Translate("create connector", err)
	}
	return CreatedConnector{Connector: rec.public(), WebhookSecret: secret}, nil
}

// connectorCount is the org's count of connectors made (kind kindCount,
// id idCount): a store lists no artifacts inside a transaction, so the cap
// is kept by a counter written with each.
type connectorCount struct {
	Made int `json:"made"`
}

// countConnector counts one more connector of the org in tx, or refuses
// it past MaxConnectors.
func countConnector(ctx context.Context, tx store.Tx, at time.Time) error {
	var c connectorCount
	r, err := tx.ArtifactInTx(ctx, kindCount, idCount)
	switch {
	case core.IsNotFound(err):
		r = artifact.Record{OrgID: tx.OrgID(), Kind: kindCount, ID: idCount}
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(r.Body, &c); err != nil {
			return err
		}
	}
	if c.Made >= MaxConnectors {
		return core.New(core.ErrConflict, CodeConnectorLimit,
			"the org has made %d signal connectors, the most it may (revoked ones count: they stay listed)", c.Made)
	}
	c.Made++
	r.Body, _ = json.Marshal(c)
	r.CreatedAt = at
	return tx.PutArtifact(ctx, r)
}

func (r connectorRecord) event() connectorEvent {
	at := r.CreatedAt
	if r.Status == StatusRevoked {
		at = r.RevokedAt
	}
	return connectorEvent{ConnectorID: r.ConnectorID, Name: r.Name, RequireSignature: r.RequireSignature, Status: r.Status, At: at}
}

// ListConnectors returns the org's connectors, revoked ones included, in
// the order they were made.
func (s *Service) ListConnectors(ctx context.Context, orgID string) ([]Connector, error) {
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return nil, err
	}
	recs, err := s.d.Store.ArtifactsByRef(ctx, orgID, kindConnector, refConnector, 0)
	if err != nil {
		return nil, core.Unavailable("list connectors", err)
	}
	out := make([]Connector, 0, len(recs))
	for _, r := range recs {
		var c connectorRecord
		if err := json.Unmarshal(r.Body, &c); err != nil {
			return nil, core.Unavailable("decode connector", err)
		}
		out = append(out, c.public())
	}
	return out, nil
}

// RevokeConnector revokes the org's connector: its ingress answers the
// same 401 as an unknown connector's from then on. The metadata stays;
// the secret's hash and sealed copy go. Revoking a revoked connector
// answers it as it stands.
func (s *Service) RevokeConnector(ctx context.Context, orgID, connectorID string) (Connector, error) {
	if !core.ValidID(connectorID) {
		return Connector{}, core.Invalid(CodeInvalidConnectorID, "connectorId", "the connector id must be a canonical UUID")
	}
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return Connector{}, err
	}
	at := s.d.Now()
	var out connectorRecord
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		r, err := tx.ArtifactInTx(ctx, kindConnector, connectorID)
		if core.IsNotFound(err) {
			return core.New(core.ErrNotFound, CodeConnectorNotFound, "signal connector not found")
		}
		if err != nil {
			return err
		}
		var c connectorRecord
		if err := json.Unmarshal(r.Body, &c); err != nil {
			return err
		}
		if c.Status == StatusRevoked {
			out = c
			return nil
		}
		c.Status, c.RevokedAt, c.SecretHash, c.SealedSecret = StatusRevoked, core.Format(at), "", ""
		body, err := json.Marshal(c)
		if err != nil {
			return err
		}
		r.Body = body
		if err := tx.PutArtifact(ctx, r); err != nil {
			return err
		}
		out = c
		return core.AppendRecord(ctx, tx, ledger.KindSignalConnectorRevoked, connectorID, c.event(), at)
	})
	if err != nil {
		return Connector{}, core.Translate("revoke connector", err)
	}
	return out.public(), nil
}

// checkName returns the name trimmed of surrounding blanks.
func checkName(name string) (string, error) {
	name = strings.TrimSpace(name)
	n := utf8.RuneCountInString(name)
	bad := n == 0 || n > MaxNameLen || !utf8.ValidString(name)
	for _, c := range name {
		bad = bad || unicode.IsControl(c) || c == '\u2028' || c == '\u2029'
	}
	if bad {
		return "", core.Invalid(CodeInvalidConnectorName, "name", "name must be 1 to %d characters without control characters", MaxNameLen)
	}
	return name, nil
}

// newSecret returns "whsec_" + base64 of 32 random bytes.
func newSecret(rand io.Reader) (string, error) {
	var b [32]byte
	if _, err := io.ReadFull(rand, b[:]); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}
