package sharelink

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/store"
)

// Share links are expiring capabilities an org hands out so that anyone
// holding one can check a single dossier — its outcome, its digest and its
// place in the org's ledger — without a credential and without seeing the
// dossier itself (no intent, actor, reason codes, policy or org id).
//
// A link is the path /v1/public/decision-dossiers/{dossierId}/verify with
// the query sig=<token>, where
//
//	token   = base64url(payload) "." base64url(mac)
//	payload = version (1 byte, 1) | expiry (unix seconds, 8 bytes big-endian)
//	          | epoch (8 bytes big-endian) | org id (its bytes)
//	mac     = HMAC-SHA256(k, "clearance/share-link/v1" 0x00 dossier_id 0x00 payload)
//	k       = HMAC-SHA256(Options.ShareSecret, "clearance share-link key v1")
//
// (base64url without padding, RFC 4648 §5). Links are stateless: nothing is
// stored when one is created. Revocation is org-wide: every link names the
// org's share epoch when it was made, and RevokeShareLinks moves the epoch
// on (an artifact of kind "share_epoch", id "current", written with a
// ledger entry), so every earlier link stops verifying at once.

// Codes of share links.
const (
	// CodeShareLinkInvalid: the one answer to a link that is malformed,
	// tampered with, expired, revoked or names no dossier (404), so that
	// the answer never says which.
	CodeShareLinkInvalid = "SHARE_LINK_INVALID"
	// CodeShareLinksNotConfigured: the engine has no ShareSecret (503).
	CodeShareLinksNotConfigured = "SHARE_LINKS_NOT_CONFIGURED"
	// CodeShareLinkExpiry: a requested lifetime out of range (400).
	CodeShareLinkExpiry = "INVALID_SHARE_LINK_EXPIRY"
)

// Share link limits.
const (
	// DefaultShareLinkTTL is a link's lifetime when none is asked for.
	DefaultShareLinkTTL = 7 * 24 * time.Hour
	// MaxShareLinkTTL is the longest lifetime a link may have.
	MaxShareLinkTTL = 30 * 24 * time.Hour
	// MinShareSecretLen is the shortest Options.ShareSecret accepted.
	MinShareSecretLen = 32
	// MaxShareTokenLen bounds the sig a verification reads.
	MaxShareTokenLen = 512
)

// PathPublicDossierVerify is the path prefix of share links.
const PathPublicDossierVerify = "/v1/public/decision-dossiers/"

const (
	shareEpochKind = "share_epoch"
	shareEpochID   = "current"
	shareVersion   = 1
	shareFixedLen  = 1 + 8 + 8 // version, expiry, epoch
	shareMACDomain = "clearance/share-link/v1"
	shareKeyDomain = "clearance share-link key v1"
)

var shareB64 = base64.RawURLEncoding.Strict()

// ShareLink is a share link of one dossier. Its JSON form is the answer to
// creating one.
type ShareLink struct {
	DossierID string `json:"dossier_id"`
	// URL is the link's path and query, relative to the server's base URL.
	URL string `json:"url"`
	// Sig is the capability token (the sig query parameter).
	Sig       string `json:"sig"`
	ExpiresAt string `json:"expires_at"`

	// OrgID is the org that shared the dossier. It is never part of a
	// public answer.
	OrgID string `json:"-"`

	opened bool // made by OpenShareLink
}

// ShareLinkRevocation is the answer to revoking an org's share links.
type ShareLinkRevocation struct {
	// Epoch is the org's share epoch now; links made before carry a
	// smaller one and no longer verify.
	Epoch     uint64 `json:"epoch"`
	RevokedAt string `json:"revoked_at"`
}

// shareEpoch is the stored form of an org's share epoch.
type shareEpoch struct {
	Epoch     uint64 `json:"epoch"`
	RevokedAt string `json:"revoked_at"`
}

// SharedVerification is what a share link reveals: the public answer.
// Nothing in it names the org, the intent, the actor, the reason codes or
// the policy.
type SharedVerification struct {
	DossierID string         `json:"dossier_id"`
	Outcome   policy.Outcome `json:"outcome"`
	Mode      policy.Mode    `json:"mode"`
	// DossierDigest is the digest the ledger recorded for the dossier (the
	// digest of the stored dossier when no ledger entry records it).
	DossierDigest string `json:"dossier_digest"`
	// RecomputedDigestMatches: the stored dossier still hashes to the
	// digest its ledger entry recorded.
	RecomputedDigestMatches bool              `json:"recomputed_digest_matches"`
	Ledger                  SharedLedgerCheck `json:"ledger"`
	// Verified is the conjunction of every check above and below.
	Verified      bool   `json:"verified"`
	LinkExpiresAt string `json:"link_expires_at"`
	VerifiedAt    string `json:"verified_at"`
}

// SharedLedgerCheck places a shared dossier in its org's ledger.
type SharedLedgerCheck struct {
	// Seq is the seq of the dossier's ledger entry.
	Seq uint64 `json:"seq"`
	// EntryHashValid: the entry at Seq records this dossier's decision and
	// recomputes to its entry_hash.
	EntryHashValid bool `json:"entry_hash_valid"`
	// ChainValid: entries 1 to Seq link from genesis without a gap, each
	// recomputing to its entry_hash (ledger.VerifyPrefix).
	ChainValid bool `json:"chain_valid"`
	// AnchoredCheckpointValid: the entry's inclusion proof leads to the
	// root of the org's latest checkpoint and that checkpoint carries a
	// valid signature of the ledger key. Absent when no ledger key is
	// configured or no signed checkpoint covers the entry yet.
	AnchoredCheckpointValid *bool `json:"anchored_checkpoint_valid,omitempty"`
}

// errShareLinkInvalid is the one refusal of a link, whatever is wrong.
func errShareLinkInvalid() *core.Error {
	return core.New(core.ErrNotFound, CodeShareLinkInvalid, "this share link is not valid: it may be malformed, expired or revoked")
}

// CreateShareLink makes a share link of the org's dossier that expires
// after ttl (0 means DefaultShareLinkTTL; at most MaxShareLinkTTL, in whole
// seconds). Nothing is stored.
func (s *Service) CreateShareLink(ctx context.Context, orgID, dossierID string, ttl time.Duration) (ShareLink, error) {
	if s.secret == nil {
		return ShareLink{}, core.New(core.ErrUnavailable, CodeShareLinksNotConfigured, "share links are not configured on this server (no share secret)")
	}
	if ttl == 0 {
		ttl = DefaultShareLinkTTL
	}
	if ttl < time.Second || ttl > MaxShareLinkTTL || ttl%time.Second != 0 {
		return ShareLink{}, core.Invalid(CodeShareLinkExpiry, "expires_in_seconds", "expires_in_seconds must be a whole number of seconds from 1 to %d", int64(MaxShareLinkTTL/time.Second))
	}
	if _, _, err := core.ReadDossier(ctx, s.d.Store, orgID, dossierID); err != nil {
		return ShareLink{}, err
	}
	epoch, err := s.shareEpoch(ctx, orgID)
	if err != nil {
		return ShareLink{}, err
	}
	exp := s.d.Now().Unix() + int64(ttl/time.Second)
	payload := make([]byte, shareFixedLen, shareFixedLen+len(orgID))
	payload[0] = shareVersion
	binary.BigEndian.PutUint64(payload[1:9], uint64(exp))
	binary.BigEndian.PutUint64(payload[9:17], epoch)
	payload = append(payload, orgID...)
	sig := shareB64.EncodeToString(payload) + "." + shareB64.EncodeToString(s.shareMAC(dossierID, payload))
	return newShareLink(orgID, dossierID, sig, exp, false), nil
}

func newShareLink(orgID, dossierID, sig string, exp int64, opened bool) ShareLink {
	return ShareLink{
		DossierID: dossierID, URL: PathPublicDossierVerify + dossierID + "/verify?sig=" + sig, Sig: sig,
		ExpiresAt: time.Unix(exp, 0).UTC().Format(core.TimeFormat), OrgID: orgID, opened: opened,
	}
}

// OpenShareLink checks a share link of dossierID: its MAC (compared in
// constant time), its expiry and the org's share epoch. Every refusal is
// the same core.ErrNotFound with CodeShareLinkInvalid. It reads only the org's
// share epoch; VerifySharedDossier does the rest.
func (s *Service) OpenShareLink(ctx context.Context, dossierID, sig string) (ShareLink, error) {
	if s.secret == nil || !core.ValidID(dossierID) || len(sig) > MaxShareTokenLen {
		return ShareLink{}, errShareLinkInvalid()
	}
	p64, m64, ok := strings.Cut(sig, ".")
	if !ok {
		return ShareLink{}, errShareLinkInvalid()
	}
	payload, err1 := shareB64.DecodeString(p64)
	mac, err2 := shareB64.DecodeString(m64)
	if err1 != nil || err2 != nil || len(payload) <= shareFixedLen || payload[0] != shareVersion {
		return ShareLink{}, errShareLinkInvalid()
	}
	if !hmac.Equal(mac, s.shareMAC(dossierID, payload)) {
		return ShareLink{}, errShareLinkInvalid()
	}
	exp := int64(binary.BigEndian.Uint64(payload[1:9]))
	epoch := binary.BigEndian.Uint64(payload[9:17])
	orgID := string(payload[shareFixedLen:])
	if exp <= s.d.Now().Unix() {
		return ShareLink{}, errShareLinkInvalid()
	}
	current, err := s.shareEpoch(ctx, orgID)
	if err != nil {
		return ShareLink{}, err
	}
	if epoch != current {
		return ShareLink{}, errShareLinkInvalid()
	}
	return newShareLink(orgID, dossierID, sig, exp, true), nil
}

// VerifySharedDossier verifies the dossier of a link OpenShareLink opened
// and answers only what verification needs (see SharedVerification). It
// reads the org's ledger from seq 1 to the dossier's entry and writes
// nothing.
func (s *Service) VerifySharedDossier(ctx context.Context, l ShareLink) (SharedVerification, error) {
	if !l.opened {
		return SharedVerification{}, errShareLinkInvalid()
	}
	r, err := s.d.Store.Dossier(ctx, l.OrgID, l.DossierID)
	if core.IsNotFound(err) {
		return SharedVerification{}, errShareLinkInvalid()
	}
	if err != nil {
		return SharedVerification{}, core.Unavailable("read dossier", err)
	}
	d, _ := dossier.Decode(r.Body) // a body that does not parse fails the digest check below
	bodyDigest := canon.Digest(r.Body)
	v := SharedVerification{
		DossierID: l.DossierID, Outcome: d.Outcome, Mode: d.Mode, DossierDigest: bodyDigest,
		Ledger: SharedLedgerCheck{Seq: d.LedgerSeq}, LinkExpiresAt: l.ExpiresAt, VerifiedAt: s.d.Now().Format(core.TimeFormat),
	}
	if d.LedgerSeq > 0 {
		if err := s.checkSharedEntry(ctx, l, bodyDigest, &v); err != nil {
			return SharedVerification{}, err
		}
	}
	v.Verified = v.RecomputedDigestMatches && v.Ledger.EntryHashValid && v.Ledger.ChainValid &&
		(v.Ledger.AnchoredCheckpointValid == nil || *v.Ledger.AnchoredCheckpointValid)
	return v, nil
}

// checkSharedEntry fills in the ledger checks of v.
func (s *Service) checkSharedEntry(ctx context.Context, l ShareLink, bodyDigest string, v *SharedVerification) error {
	seq := v.Ledger.Seq
	page, err := s.d.Store.LedgerEntries(ctx, l.OrgID, seq-1, 1)
	if err != nil {
		return core.Unavailable("read ledger", err)
	}
	if len(page) != 1 || page[0].Seq != seq {
		return nil // no entry at seq: every ledger check fails
	}
	en := page[0]
	if en.Kind != ledger.KindDecision || en.SubjectID != l.DossierID || en.OrgID != l.OrgID {
		return nil // the entry records something else
	}
	v.DossierDigest = en.PayloadDigest
	v.RecomputedDigestMatches = bodyDigest == en.PayloadDigest
	h, err := en.ComputeHash()
	v.Ledger.EntryHashValid = err == nil && h == en.EntryHash
	rep, err := ledger.VerifyPrefix(ctx, s.d.Store, l.OrgID, seq)
	if err != nil {
		return core.Unavailable("verify ledger", err)
	}
	v.Ledger.ChainValid = rep.Valid
	k := s.d.LedgerKey
	if k == nil {
		return nil
	}
	a, err := ledger.NewAnchor(ctx, s.d.Store, l.OrgID, seq)
	switch {
	case errors.Is(err, ledger.ErrNotSealed):
		return nil // no checkpoint covers the entry yet
	case errors.Is(err, ledger.ErrBrokenChain):
		v.Ledger.AnchoredCheckpointValid = new(false)
		return nil
	case err != nil:
		return core.Unavailable("read ledger tree", err)
	}
	_, err = ledger.VerifyAnchor(k.VerifierKey(), ledger.Origin(s.d.Issuer, l.OrgID), en, a)
	v.Ledger.AnchoredCheckpointValid = new(err == nil)
	return nil
}

// RevokeShareLinks revokes every share link the org has made: its share
// epoch moves on, in one write with a ledger entry. Links made afterwards
// verify.
func (s *Service) RevokeShareLinks(ctx context.Context, orgID string) (ShareLinkRevocation, error) {
	now := s.d.Now()
	var out ShareLinkRevocation
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		r, err := tx.ArtifactInTx(ctx, shareEpochKind, shareEpochID)
		var cur shareEpoch
		switch {
		case core.IsNotFound(err):
		case err != nil:
			return err
		default:
			if err := json.Unmarshal(r.Body, &cur); err != nil {
				return fmt.Errorf("share epoch of %s: %w", orgID, err)
			}
		}
		next := shareEpoch{Epoch: cur.Epoch + 1, RevokedAt: now.Format(core.TimeFormat)}
		body, err := canon.Marshal(next)
		if err != nil {
			return err
		}
		if err := tx.PutArtifact(ctx, artifact.Record{OrgID: orgID, Kind: shareEpochKind, ID: shareEpochID, CreatedAt: now, Body: body}); err != nil {
			return err
		}
		if err := core.AppendRecord(ctx, tx, ledger.KindShareLinksRevoked, shareEpochKind+"/"+strconv.FormatUint(next.Epoch, 10), next, now); err != nil {
			return err
		}
		out = ShareLinkRevocation(next)
		return nil
	})
	if err != nil {
		return ShareLinkRevocation{}, core.Translate("revoke share links", err)
	}
	return out, nil
}

// shareEpoch is the org's current share epoch (0 before any revocation).
func (s *Service) shareEpoch(ctx context.Context, orgID string) (uint64, error) {
	r, err := s.d.Store.Artifact(ctx, orgID, shareEpochKind, shareEpochID)
	if core.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, core.Unavailable("read share epoch", err)
	}
	var cur shareEpoch
	if err := json.Unmarshal(r.Body, &cur); err != nil {
		return 0, core.Unavailable("read share epoch", err)
	}
	return cur.Epoch, nil
}

// shareMAC is the MAC of a link of dossierID with payload.
func (s *Service) shareMAC(dossierID string, payload []byte) []byte {
	kh := hmac.New(sha256.New, s.secret)
	kh.Write([]byte(shareKeyDomain))
	h := hmac.New(sha256.New, kh.Sum(nil))
	h.Write([]byte(shareMACDomain))
	h.Write([]byte{0})
	h.Write([]byte(dossierID))
	h.Write([]byte{0})
	h.Write(payload)
	return h.Sum(nil)
}

// Config is what share links need beside the kernel.
type Config struct {
	// Secret keys the MACs (at least MinShareSecretLen bytes); nil means
	// links cannot be made (SHARE_LINKS_NOT_CONFIGURED) and none verifies.
	Secret []byte
}

// Service makes, verifies and revokes share links. Create it with New.
type Service struct {
	d      core.Deps
	secret []byte
}

// New returns the share-link feature over the kernel d.
func New(d core.Deps, cfg Config) *Service { return &Service{d: d, secret: cfg.Secret} }
