package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/tenant"
)

// RevokedCredentials is the answer to RevokeOrgCredentials.
type RevokedCredentials struct {
	OrgID string `json:"org_id"`
	// KeyIDs are the credentials revoked (org keys, onboarding grants,
	// automation credentials), oldest first.
	KeyIDs    []string `json:"revoked_key_ids"`
	RevokedAt string   `json:"revoked_at"`
	// Replacement is the org key issued in the same transaction, when asked
	// for: its secret is shown only here.
	Replacement *IssuedKey `json:"replacement,omitempty"`
}

// credentialsRevoked is the ledgered form of an org-wide revocation.
type credentialsRevoked struct {
	KeyIDs        []string `json:"revoked_key_ids"`
	By            string   `json:"by"`
	ReplacementID string   `json:"replacement_key_id,omitempty"`
	At            string   `json:"at"`
}

// Record of an org's last org-wide revocation (kind revocationKind, id
// revocationID): the transactions that issue credentials read it, so that
// nothing opened or authenticated before a revocation issues one after it.
const (
	revocationKind = "admin.revocation"
	revocationID   = "last"
)

// keyRevokedKind marks, by key id, a credential RevokeCredential revoked.
const keyRevokedKind = "admin.key-revoked"

// errAlreadyRevoked ends a revocation transaction that another one beat.
var errAlreadyRevoked = errors.New("admin: credential already revoked")

type revocation struct {
	At time.Time `json:"at"`
}

// RevokedSince returns when the transaction's org last revoked all its
// credentials (zero: never). A change that issues a credential refuses
// when what authorizes it (the caller's credential, a mapping session, an
// authorization code) is older than that: it was revoked with the rest.
func RevokedSince(ctx context.Context, tx store.Tx) (time.Time, error) {
	rec, err := tx.ArtifactInTx(ctx, revocationKind, revocationID)
	if core.IsNotFound(err) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	var r revocation
	if err := json.Unmarshal(rec.Body, &r); err != nil {
		return time.Time{}, fmt.Errorf("admin: revocation record of %s: %w", tx.OrgID(), err)
	}
	return r.At, nil
}

// maxRevokePasses bounds the passes of RevokeOrgCredentials: each revokes
// what the previous listing found, and a credential issued between a
// listing and its transaction is caught by the next.
const maxRevokePasses = 3

// RevokeOrgCredentials revokes every live credential of orgID,
// in the org's transaction with a credentials.revoked entry naming by (who
// asked: an account id), and, when replacement is set, issues a fresh org
// key (org:*) in the same transaction. Revoked keys stop working on this
// server at once and on others within KeyCacheTTL.
func (s *Service) RevokeOrgCredentials(ctx context.Context, orgID, by string, replacement bool) (RevokedCredentials, error) {
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return RevokedCredentials{}, err
	}
	at := s.d.Now()
	out := RevokedCredentials{OrgID: orgID, KeyIDs: []string{}, RevokedAt: core.Format(at)}
	for pass := 0; pass < maxRevokePasses; pass++ {
		keys, err := s.d.Store.APIKeysOf(ctx, orgID)
		if err != nil {
			return RevokedCredentials{}, core.Unavailable("list credentials", err)
		}
		// Every live credential but the replacement, whatever its
		// CreatedAt (servers' clocks differ): one issued while this runs
		// (a request authenticated just before) is caught by the next pass.
		var due []tenant.APIKey
		for _, k := range keys {
			if k.RevokedAt.IsZero() && (out.Replacement == nil || k.ID != out.Replacement.KeyID) {
				due = append(due, k)
			}
		}
		if len(due) == 0 && pass > 0 {
			break
		}
		var issued *IssuedKey
		var ids []string
		err = s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
			issued, ids = nil, make([]string, 0, len(due))
			for _, k := range due {
				k.RevokedAt = at
				if err := tx.PutAPIKey(ctx, k); err != nil {
					return err
				}
				ids = append(ids, k.ID)
			}
			body, _ := json.Marshal(revocation{At: at})
			if err := tx.PutArtifact(ctx, artifact.Record{OrgID: orgID, Kind: revocationKind, ID: revocationID,
				CreatedAt: at, Body: body}); err != nil {
				return err
			}
			rec := credentialsRevoked{KeyIDs: ids, By: by, At: core.Format(at)}
			if replacement && out.Replacement == nil {
				k, err := s.IssueKeyIn(ctx, tx, KeySpec{OrgID: orgID, Kind: tenant.KindOrg, Scopes: []tenant.Scope{tenant.ScopeOrgAll}})
				if err != nil {
					return err
				}
				issued, rec.ReplacementID = &k, k.KeyID
			}
			return core.AppendRecord(ctx, tx, ledger.KindCredentialsRevoked, orgID, rec, at)
		})
		if err != nil {
			return RevokedCredentials{}, core.Translate("revoke credentials", err)
		}
		if len(due) > 0 {
			s.forget(due...)
		}
		out.KeyIDs = append(out.KeyIDs, ids...)
		if issued != nil {
			out.Replacement = issued
		}
	}
	return out, nil
}

// RevokeCredential revokes one credential of orgID, found by the hash of
// its secret, ledgered as credentials.revoked naming by (why: an account
// id, or a reason such as "oauth_code_replayed"). Revoking a revoked or
// unknown credential changes nothing.
func (s *Service) RevokeCredential(ctx context.Context, orgID, hash, by string) error {
	k, err := s.d.Store.APIKeyByHash(ctx, hash)
	if core.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return core.Unavailable("read credential", err)
	}
	if k.OrgID != orgID || !k.RevokedAt.IsZero() {
		return nil
	}
	at := s.d.Now()
	k.RevokedAt = at
	err = s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		// The check above read outside the org's (serialized) transaction:
		// a marker read inside it makes a concurrent revocation of the same
		// key change nothing, instead of ledgering it twice.
		if _, err := tx.ArtifactInTx(ctx, keyRevokedKind, k.ID); err == nil {
			return errAlreadyRevoked
		} else if !core.IsNotFound(err) {
			return err
		}
		if err := core.WriteRecord(ctx, tx, keyRevokedKind, k.ID, at, revocation{At: at}); err != nil {
			return err
		}
		if err := tx.PutAPIKey(ctx, k); err != nil {
			return err
		}
		return core.AppendRecord(ctx, tx, ledger.KindCredentialsRevoked, orgID,
			credentialsRevoked{KeyIDs: []string{k.ID}, By: by, At: core.Format(at)}, at)
	})
	if errors.Is(err, errAlreadyRevoked) {
		return nil
	}
	if err != nil {
		return core.Translate("revoke credential", err)
	}
	s.forget(k)
	return nil
}
