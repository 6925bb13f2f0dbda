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
	"github.com/clearancehq/clearance/audit"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/proof"
	"github.com/clearancehq/clearance/store"
)

// Share links are expiring capabilities an org hands out so that anyone
// holding one can check a single dossier without a credential. One link
// (one sig) opens up to three public routes of that dossier, each saying
// only what its SharedURL.Reveals states:
//
//   - verify: the outcome, the mode, the dossier's digest and its place in
//     the org's signed ledger — not the dossier itself (no intent, actor,
//     reason codes, policy or org id);
//   - reproduce: whether the recorded intent, evaluated again under the
//     recorded policy, gives the recorded decision — the outcomes, the
//     policy version and bundle digest, not the rules, the intent or the
//     reason codes;
//   - proof-bundle, only when the org asked for it (ShareLinkOptions.
//     ProofBundle): the dossier's whole proof packet, dossier included, which
//     anyone verifies offline with the ledger key.
//
// A link is the path /v1/public/decision-dossiers/{dossierId}/<route> with
// the query sig=<token>, where
//
//	token   = base64url(payload) "." base64url(mac)
//	payload = version (1 byte, 2) | expiry (unix seconds, 8 bytes big-endian)
//	          | epoch (8 bytes big-endian) | grants (1 byte) | org id (its bytes)
//	mac     = HMAC-SHA256(k, "clearance/share-link/v1" 0x00 dossier_id 0x00 payload)
//	k       = HMAC-SHA256(Options.ShareSecret, "clearance share-link key v1")
//
// (base64url without padding, RFC 4648 §5). grants bit 0 opens the proof
// bundle; the other bits are zero. A version 1 payload (made before the
// trio existed) has no grants byte and opens verify only: it was handed out
// as a link that reveals no policy, and reproduce names the policy version.
// Links are stateless: nothing is stored when one is created. Revocation is
// org-wide: every link names the org's share epoch when it was made, and
// RevokeShareLinks moves the epoch on (an artifact of kind "share_epoch", id
// "current", written with a ledger entry), so every earlier link stops
// opening any of the routes at once.

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
	// MaxUnsealedCheck is how many ledger entries after the org's latest
	// signed checkpoint a verification walks to place an entry no
	// checkpoint covers yet; an entry further on is answered
	// ENTRY_NOT_YET_SEALED (409) until the sealer catches up.
	MaxUnsealedCheck = 10_000
)

// PathPublicDossierVerify is the path prefix of share links.
const PathPublicDossierVerify = "/v1/public/decision-dossiers/"

// The routes a share link opens, after PathPublicDossierVerify and the
// dossier id.
const (
	RouteVerify      = "verify"
	RouteReproduce   = "reproduce"
	RouteProofBundle = "proof-bundle"
)

// What each route reveals, as the answer to creating a link states it.
const (
	RevealsVerify = "the dossier's outcome, mode and digest, and whether it is intact and recorded in the org's " +
		"signed ledger; not the dossier itself (no intent, actor, reason codes, policy or org id)"
	RevealsReproduce = "whether evaluating the recorded intent again under the recorded policy gives the recorded " +
		"decision: both outcomes, the policy version and the bundle digest; not the rules, the intent or the reason codes"
	RevealsProofBundle = "the whole dossier (intent, actor, reason codes, policy snapshot, org id) with its ledger " +
		"entry, inclusion proof, signed checkpoint and proof bundle, so that anyone can verify it offline with the " +
		"ledger key"
)

const (
	shareEpochKind = "share_epoch"
	shareEpochID   = "current"
	shareVersion1  = 1 // verify only; no grants byte
	shareVersion   = 2
	shareFixedLen1 = 1 + 8 + 8     // version, expiry, epoch
	shareFixedLen  = 1 + 8 + 8 + 1 // version, expiry, epoch, grants
	shareMACDomain = "clearance/share-link/v1"
	shareKeyDomain = "clearance share-link key v1"

	grantProofBundle = 1 << 0
)

var shareB64 = base64.RawURLEncoding.Strict()

// ShareLinkOptions are the choices of a new link. The zero value is a link
// of DefaultShareLinkTTL that opens verify and reproduce.
type ShareLinkOptions struct {
	// TTL is the link's lifetime: 0 means DefaultShareLinkTTL; at most
	// MaxShareLinkTTL, in whole seconds.
	TTL time.Duration
	// ProofBundle also opens the proof-bundle route, which serves the
	// dossier itself (RevealsProofBundle).
	ProofBundle bool
}

// ShareLink is a share link of one dossier. Its JSON form is the answer to
// creating one.
type ShareLink struct {
	DossierID string `json:"dossier_id"`
	// URL is the verify route's path and query, relative to the server's
	// base URL (URLs.Verify.URL).
	URL string `json:"url"`
	// Sig is the capability token (the sig query parameter).
	Sig       string `json:"sig"`
	ExpiresAt string `json:"expires_at"`
	// ProofBundle: the link also opens the proof-bundle route.
	ProofBundle bool `json:"proof_bundle"`
	// URLs lists every route the link opens and what each reveals.
	URLs SharedURLs `json:"urls"`

	// OrgID is the org that shared the dossier. It is never part of a
	// public answer.
	OrgID string `json:"-"`

	opened     bool // made by OpenShareLink
	verifyOnly bool // a version 1 link
}

// SharedURLs are the public routes one link opens.
type SharedURLs struct {
	Verify    SharedURL `json:"verify"`
	Reproduce SharedURL `json:"reproduce"`
	// ProofBundle is absent unless the link opens it.
	ProofBundle *SharedURL `json:"proof_bundle,omitempty"`
}

// SharedURL is one public route of a link: its path and query, relative to
// the server's base URL, and what it reveals to whoever holds the link.
type SharedURL struct {
	URL     string `json:"url"`
	Reveals string `json:"reveals"`
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
//
// It is anchored on the org's latest signed checkpoint, so it costs
// O(log n) reads of an n-entry ledger: an entry the checkpoint covers is
// placed by its inclusion proof; an entry after it, by the chain from the
// checkpoint's last entry (itself placed by its inclusion proof) — at most
// MaxUnsealedCheck entries, which the sealer keeps to about a second of
// appends. Only an engine without a ledger key, which signs no
// checkpoints, walks the chain from genesis.
type SharedLedgerCheck struct {
	// Seq is the seq of the dossier's ledger entry.
	Seq uint64 `json:"seq"`
	// EntryHashValid: the entry at Seq records this dossier's decision and
	// recomputes to its entry_hash.
	EntryHashValid bool `json:"entry_hash_valid"`
	// ChainValid: the entry sits on an intact chain from genesis. For a
	// checkpointed entry it is AnchoredCheckpointValid (sealing checked the
	// chain before signing, and the proof places this very entry in it);
	// otherwise the entries from the latest checkpoint's last one (or
	// genesis) to Seq link without a gap, each recomputing to its
	// entry_hash.
	ChainValid bool `json:"chain_valid"`
	// Checkpointed: the org's latest signed checkpoint covers the entry.
	// False for an entry appended since (the sealer signs one within about
	// a second) and on an engine without a ledger key.
	Checkpointed bool `json:"checkpointed"`
	// CheckpointTreeSize is the size of the latest signed checkpoint the
	// check was anchored on; absent when there is none.
	CheckpointTreeSize uint64 `json:"checkpoint_tree_size,omitempty"`
	// AnchoredCheckpointValid: the entry's inclusion proof leads to the
	// root of the org's latest checkpoint and that checkpoint carries a
	// valid signature of the ledger key. Absent when the entry is not
	// Checkpointed.
	AnchoredCheckpointValid *bool `json:"anchored_checkpoint_valid,omitempty"`
}

// SharedReproduction is what the reproduce route reveals: the recorded
// decision evaluated again, by outcome only. Nothing in it names the org,
// the intent, the actor, the reason codes or the policy's rules.
type SharedReproduction struct {
	DossierID         string         `json:"dossier_id"`
	RecordedOutcome   policy.Outcome `json:"recorded_outcome"`
	ReproducedOutcome policy.Outcome `json:"reproduced_outcome"`
	// Matches: the evaluation gave the recorded outcome, reason codes and
	// matched rules (compared here; only the outcomes are shown).
	Matches       bool   `json:"matches"`
	PolicyVersion string `json:"policy_version"`
	BundleDigest  string `json:"bundle_digest"`
	LinkExpiresAt string `json:"link_expires_at"`
	ReproducedAt  string `json:"reproduced_at"`
}

// errShareLinkInvalid is the one refusal of a link, whatever is wrong.
func errShareLinkInvalid() *core.Error {
	return core.New(core.ErrNotFound, CodeShareLinkInvalid, "this share link is not valid: it may be malformed, expired or revoked")
}

// CreateShareLink makes a share link of the org's dossier with opts.
// Nothing is stored.
func (s *Service) CreateShareLink(ctx context.Context, orgID, dossierID string, opts ShareLinkOptions) (ShareLink, error) {
	if s.secret == nil {
		return ShareLink{}, core.New(core.ErrUnavailable, CodeShareLinksNotConfigured, "share links are not configured on this server (no share secret)")
	}
	ttl := opts.TTL
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
	var grants byte
	if opts.ProofBundle {
		grants |= grantProofBundle
	}
	exp := s.d.Now().Unix() + int64(ttl/time.Second)
	payload := make([]byte, shareFixedLen, shareFixedLen+len(orgID))
	payload[0] = shareVersion
	binary.BigEndian.PutUint64(payload[1:9], uint64(exp))
	binary.BigEndian.PutUint64(payload[9:17], epoch)
	payload[17] = grants
	payload = append(payload, orgID...)
	sig := shareB64.EncodeToString(payload) + "." + shareB64.EncodeToString(s.shareMAC(dossierID, payload))
	return newShareLink(orgID, dossierID, sig, exp, grants, false), nil
}

func newShareLink(orgID, dossierID, sig string, exp int64, grants byte, opened bool) ShareLink {
	url := func(route string) string { return PathPublicDossierVerify + dossierID + "/" + route + "?sig=" + sig }
	l := ShareLink{
		DossierID: dossierID, URL: url(RouteVerify), Sig: sig,
		ExpiresAt: time.Unix(exp, 0).UTC().Format(core.TimeFormat), ProofBundle: grants&grantProofBundle != 0,
		URLs: SharedURLs{Verify: SharedURL{URL: url(RouteVerify), Reveals: RevealsVerify},
			Reproduce: SharedURL{URL: url(RouteReproduce), Reveals: RevealsReproduce}},
		OrgID: orgID, opened: opened,
	}
	if l.ProofBundle {
		l.URLs.ProofBundle = &SharedURL{URL: url(RouteProofBundle), Reveals: RevealsProofBundle}
	}
	return l
}

// OpenShareLink checks a share link of dossierID: its MAC (compared in
// constant time), its expiry and the org's share epoch. Every refusal is
// the same core.ErrNotFound with CodeShareLinkInvalid. It reads only the org's
// share epoch; VerifySharedDossier, ReproduceSharedDossier and
// SharedProofPacket do the rest.
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
	if err1 != nil || err2 != nil || len(payload) == 0 {
		return ShareLink{}, errShareLinkInvalid()
	}
	fixed := shareFixedLen
	if payload[0] == shareVersion1 {
		fixed = shareFixedLen1
	}
	if len(payload) <= fixed || payload[0] != shareVersion1 && payload[0] != shareVersion {
		return ShareLink{}, errShareLinkInvalid()
	}
	if !hmac.Equal(mac, s.shareMAC(dossierID, payload)) {
		return ShareLink{}, errShareLinkInvalid()
	}
	exp := int64(binary.BigEndian.Uint64(payload[1:9]))
	epoch := binary.BigEndian.Uint64(payload[9:17])
	var grants byte
	if payload[0] == shareVersion {
		grants = payload[17]
	}
	orgID := string(payload[fixed:])
	if exp <= s.d.Now().Unix() || grants&^grantProofBundle != 0 {
		return ShareLink{}, errShareLinkInvalid()
	}
	current, err := s.shareEpoch(ctx, orgID)
	if err != nil {
		return ShareLink{}, err
	}
	if epoch != current {
		return ShareLink{}, errShareLinkInvalid()
	}
	l := newShareLink(orgID, dossierID, sig, exp, grants, true)
	l.verifyOnly = payload[0] == shareVersion1
	return l, nil
}

// VerifySharedDossier verifies the dossier of a link OpenShareLink opened
// and answers only what verification needs (see SharedVerification). It
// reads O(log n) of the org's n ledger entries (see SharedLedgerCheck) and
// writes nothing.
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
	en, ok, err := s.entryAt(ctx, l.OrgID, seq)
	if err != nil || !ok {
		return err // no entry at seq: every ledger check fails
	}
	if en.Kind != ledger.KindDecision || en.SubjectID != l.DossierID || en.OrgID != l.OrgID {
		return nil // the entry records something else
	}
	v.DossierDigest = en.PayloadDigest
	v.RecomputedDigestMatches = bodyDigest == en.PayloadDigest
	h, err := en.ComputeHash()
	v.Ledger.EntryHashValid = err == nil && h == en.EntryHash
	k := s.d.LedgerKey
	if k == nil { // no checkpoints to anchor on: the chain from genesis
		rep, err := ledger.VerifyPrefix(ctx, s.d.Store, l.OrgID, seq)
		if err != nil {
			return core.Unavailable("verify ledger", err)
		}
		v.Ledger.ChainValid = rep.Valid
		return nil
	}
	latest, err := s.d.Store.LatestCheckpoint(ctx, l.OrgID)
	if err != nil {
		return core.Unavailable("read checkpoint", err)
	}
	v.Ledger.CheckpointTreeSize = latest.Size
	origin := ledger.Origin(s.d.Issuer, l.OrgID)
	if seq <= latest.Size {
		v.Ledger.Checkpointed = true
		ok, err := s.anchored(ctx, k, origin, l.OrgID, en, latest)
		if err != nil {
			return err
		}
		v.Ledger.AnchoredCheckpointValid = new(ok)
		v.Ledger.ChainValid = ok
		return nil
	}
	// Appended since the latest checkpoint: the chain from its last entry,
	// which its inclusion proof places (genesis when there is none).
	if seq-latest.Size > MaxUnsealedCheck {
		return core.New(core.ErrConflict, audit.CodeEntryNotYetSealed,
			"the dossier's ledger entry is not in a signed checkpoint yet; try again shortly")
	}
	var from ledger.Entry
	if latest.Size > 0 {
		last, ok, err := s.entryAt(ctx, l.OrgID, latest.Size)
		if err != nil {
			return err
		}
		if !ok {
			return nil // the checkpointed chain is missing its last entry
		}
		if ok, err = s.anchored(ctx, k, origin, l.OrgID, last, latest); err != nil || !ok {
			return err
		}
		from = last
	}
	rep, err := ledger.VerifyFrom(ctx, s.d.Store, l.OrgID, from, seq)
	if err != nil {
		return core.Unavailable("verify ledger", err)
	}
	v.Ledger.ChainValid = rep.Valid
	return nil
}

// entryAt reads the org's ledger entry seq; ok is false when there is none.
func (s *Service) entryAt(ctx context.Context, orgID string, seq uint64) (ledger.Entry, bool, error) {
	page, err := s.d.Store.LedgerEntries(ctx, orgID, seq-1, 1)
	if err != nil {
		return ledger.Entry{}, false, core.Unavailable("read ledger", err)
	}
	if len(page) != 1 || page[0].Seq != seq {
		return ledger.Entry{}, false, nil
	}
	return page[0], true, nil
}

// anchored reports whether e, as stored, is in the signed checkpoint cp:
// cp's signature by the ledger key and e's inclusion proof in its tree.
func (s *Service) anchored(ctx context.Context, k *ledger.Key, origin, orgID string, e ledger.Entry, cp ledger.Checkpoint) (bool, error) {
	leaf, err := e.LeafHash()
	if err != nil {
		return false, nil
	}
	proof, err := ledger.InclusionProof(ctx, s.d.Store, orgID, e.Seq, cp.Size)
	switch {
	case errors.Is(err, ledger.ErrOutOfRange), errors.Is(err, ledger.ErrNotSealed):
		return false, nil
	case err != nil:
		return false, core.Unavailable("read ledger tree", err)
	}
	a := ledger.Anchor{Seq: e.Seq, LeafHash: leaf, Checkpoint: string(cp.Note), InclusionProof: proof}
	_, err = ledger.VerifyAnchor(k.VerifierKey(), origin, e, a)
	return err == nil, nil
}

// ReproduceSharedDossier evaluates the dossier of a link OpenShareLink
// opened again — its recorded intent under its recorded policy — and
// answers only the outcomes and whether everything matched (see
// SharedReproduction). A recorded policy the org no longer has, or an input
// that cannot be rebuilt, stays a 409 with its code
// (RECORDED_POLICY_UNAVAILABLE, NOT_REPLAYABLE) and a detail that names
// nothing of the dossier. It records nothing.
func (s *Service) ReproduceSharedDossier(ctx context.Context, l ShareLink) (SharedReproduction, error) {
	if !l.opened || l.verifyOnly {
		return SharedReproduction{}, errShareLinkInvalid()
	}
	if s.cfg.Policies == nil {
		return SharedReproduction{}, errNotWired()
	}
	r, err := s.cfg.Policies.Reproduce(ctx, l.OrgID, l.DossierID)
	if err != nil {
		return SharedReproduction{}, publicError(err)
	}
	return SharedReproduction{DossierID: l.DossierID, RecordedOutcome: r.Recorded.Outcome, ReproducedOutcome: r.Reproduced.Outcome,
		Matches: r.Matches, PolicyVersion: r.PolicyVersion, BundleDigest: r.BundleDigest, LinkExpiresAt: l.ExpiresAt,
		ReproducedAt: s.d.Now().Format(core.TimeFormat)}, nil
}

// SharedProofPacket answers the proof packet of the dossier of a link
// OpenShareLink opened with ShareLinkOptions.ProofBundle: the same packet
// the org's own proof-packet route serves, dossier included
// (RevealsProofBundle), which proof.Verify or `clearance verify packet`
// checks offline with the ledger key. A link without the grant is refused
// like any invalid one. An entry no checkpoint covers yet is
// ENTRY_NOT_YET_SEALED (409) until the sealer signs one.
func (s *Service) SharedProofPacket(ctx context.Context, l ShareLink) (proof.Packet, error) {
	if !l.opened || !l.ProofBundle {
		return proof.Packet{}, errShareLinkInvalid()
	}
	if s.cfg.Evidence == nil {
		return proof.Packet{}, errNotWired()
	}
	p, err := s.cfg.Evidence.ProofPacket(ctx, l.OrgID, l.DossierID)
	if err != nil {
		return proof.Packet{}, publicError(err)
	}
	return p, nil
}

// publicError is err as a public route answers it: a dossier that is gone
// is an invalid link; the server being unable to answer stays as it is; any
// other refusal keeps its kind and code but not its detail, which may name
// the org's policy or the dossier's input; an error that is not a refusal
// is the store failing.
func publicError(err error) error {
	var ce *core.Error
	if !errors.As(err, &ce) {
		return core.Unavailable("shared dossier", err)
	}
	switch {
	case errors.Is(err, core.ErrNotFound):
		return errShareLinkInvalid()
	case errors.Is(err, core.ErrUnavailable):
		return ce
	}
	return core.New(ce.Kind, ce.Code, "%s", publicDetail(ce.Code))
}

// publicDetail is the detail a public answer gives with code.
func publicDetail(code string) string {
	switch code {
	case audit.CodeEntryNotYetSealed:
		return "the dossier's ledger entry is not in a signed checkpoint yet; try again shortly"
	case policies.CodeRecordedPolicyUnavailable:
		return "the policy version this dossier records is no longer available to evaluate it again"
	case policies.CodeNotReplayable:
		return "this dossier's input cannot be rebuilt exactly, so it cannot be evaluated again"
	}
	return "the shared dossier cannot be answered now"
}

func errNotWired() *core.Error {
	return core.New(core.ErrUnavailable, CodeShareLinksNotConfigured, "this share-link route is not configured on this server")
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
	// Evidence builds the proof packets of the proof-bundle route (the
	// evidence feature); nil: that route is SHARE_LINKS_NOT_CONFIGURED.
	Evidence Evidence
	// Policies reproduces the decisions of the reproduce route (the
	// policies feature); nil: that route is SHARE_LINKS_NOT_CONFIGURED.
	Policies Reproducer
}

// Evidence is what the proof-bundle route needs of the evidence feature.
type Evidence interface {
	ProofPacket(ctx context.Context, orgID, dossierID string) (proof.Packet, error)
}

// Reproducer is what the reproduce route needs of the policies feature.
type Reproducer interface {
	Reproduce(ctx context.Context, orgID, dossierID string) (policies.Reproduction, error)
}

// Service makes, verifies and revokes share links. Create it with New.
type Service struct {
	d      core.Deps
	secret []byte
	cfg    Config
}

// New returns the share-link feature over the kernel d.
func New(d core.Deps, cfg Config) *Service { return &Service{d: d, secret: cfg.Secret, cfg: cfg} }
