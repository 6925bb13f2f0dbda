package reader

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/capsule"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/pack"
	"github.com/clearancehq/clearance/proof"
)

// Kind is what an artifact is; its values are the wire strings.
type Kind string

// Kinds the reader verifies.
const (
	KindPacket    Kind = "packet"     // a proof packet (GET …/proof-packet)
	KindCapsule   Kind = "capsule"    // an Agent Action Capsule (GET …/agent-action-capsule)
	KindLedger    Kind = "ledger"     // a consistency proof (GET …/ledger/proofs/consistency)
	KindPack      Kind = "pack"       // a whole validation pack: its JSON document or its zip
	KindManifest  Kind = "manifest"   // a validation pack's manifest alone
	KindShareLink Kind = "share_link" // a share link of a dossier
)

// Kinds lists every Kind, in the order the documentation names them.
var Kinds = []Kind{KindPacket, KindCapsule, KindLedger, KindPack, KindManifest, KindShareLink}

// Sources of the key a verification used (Key.Source).
const (
	// KeyServer: the ledger key of the server running the reader (the one
	// GET /.well-known/clearance-ledger-key publishes).
	KeyServer = "server"
	// KeyCaller: the ledger key the caller supplied.
	KeyCaller = "caller"
	// KeyNone: no trusted key was at hand; whatever needs one fails.
	KeyNone = "none"
	// KeyNotNeeded: the kind's checks use no ledger key (a capsule's Class
	// 1 checks).
	KeyNotNeeded = "not_needed"
)

// Reasons of failed checks: stable strings (Check.Reason).
const (
	ReasonPacketMalformed      = "PACKET_MALFORMED"
	ReasonKeyNotTrusted        = "KEY_NOT_TRUSTED"
	ReasonDossierDigest        = "DOSSIER_DIGEST_MISMATCH"
	ReasonDossierFields        = "DOSSIER_FIELDS_MISMATCH"
	ReasonLedgerEntry          = "LEDGER_ENTRY_INVALID"
	ReasonLedgerAnchor         = "LEDGER_ANCHOR_INVALID"
	ReasonBundleSignature      = "PROOF_BUNDLE_SIGNATURE_INVALID"
	ReasonBundleStatement      = "PROOF_BUNDLE_STATEMENT_MISMATCH"
	ReasonCapsuleClass1        = "CAPSULE_CLASS1_FAILED"
	ReasonEnvelope             = "PRODUCER_ENVELOPE_INVALID"
	ReasonConsistencyMalformed = "CONSISTENCY_PROOF_MALFORMED"
	ReasonCheckpoint           = "CHECKPOINT_INVALID"
	ReasonLogMismatch          = "CHECKPOINTS_OF_ANOTHER_LOG"
	ReasonConsistency          = "CONSISTENCY_PROOF_INVALID"
	ReasonLedgerKeyUnavailable = "LEDGER_KEY_UNAVAILABLE"
	ReasonShareLinkInvalid     = "SHARE_LINK_INVALID"
	ReasonLedgerChain          = "LEDGER_CHAIN_BROKEN"
	ReasonEntryNotYetSealed    = "ENTRY_NOT_YET_SEALED"
)

// Input is one artifact to verify.
type Input struct {
	// Kind is what Artifact is; "" detects it (Detect).
	Kind Kind
	// Artifact is the artifact's bytes: JSON, or a pack's zip.
	Artifact []byte
	// ShareLink is a share link (KindShareLink): its URL, or its path and
	// query, as the org handed it out. It is never fetched.
	ShareLink string
	// LedgerKey is the ledger verifier key the caller trusts; "" means
	// Options.ServerLedgerKey.
	LedgerKey string
	// Envelopes is a producer-envelopes answer to check against a capsule.
	Envelopes []byte
	// ExportRecord is the audit-export record (GET …/audit-exports/{id})
	// whose manifest_sha256 and bundle_sha256 a pack must match.
	ExportRecord *ExportRecord
	// ExportKey is the org's export HMAC key (pack.OrgKey) checking the
	// record's bundle signature; the CLI's --export-key.
	ExportKey []byte
}

// ExportRecord is what a pack is checked against of its audit-export
// record.
type ExportRecord struct {
	ManifestSHA256 string `json:"manifest_sha256"`
	BundleSHA256   string `json:"bundle_sha256"`
	Signature      string `json:"bundle_signature_hmac_sha256"`
}

// ParseExportRecord reads the members of an audit-export record a pack is
// checked against; a record without both digests is not a finished one.
func ParseExportRecord(raw []byte) (ExportRecord, error) {
	var r ExportRecord
	if err := json.Unmarshal(raw, &r); err != nil || r.BundleSHA256 == "" || r.ManifestSHA256 == "" {
		return ExportRecord{}, invalid(CodeArtifactInvalid, "the export record is not a finished audit-export record")
	}
	return r, nil
}

// ShareLinks verifies share links: the server's share-link service. It is
// declared here, where it is used, so that this package needs no store.
type ShareLinks interface {
	// VerifyShareLink opens the link of dossierID with sig and verifies
	// its dossier. A link it does not honour is ErrShareLinkInvalid, for
	// every reason alike; any other error is the service's.
	VerifyShareLink(ctx context.Context, dossierID, sig string) (SharedDossier, error)
}

// SharedDossier is what a share link lets anyone check (the public answer
// of the share-link verification route).
type SharedDossier struct {
	DossierID               string `json:"dossier_id"`
	Outcome                 string `json:"outcome"`
	Mode                    string `json:"mode"`
	DossierDigest           string `json:"dossier_digest"`
	RecomputedDigestMatches bool   `json:"recomputed_digest_matches"`
	LedgerSeq               uint64 `json:"ledger_seq"`
	EntryHashValid          bool   `json:"entry_hash_valid"`
	ChainValid              bool   `json:"chain_valid"`
	// AnchoredCheckpointValid is nil when no signed checkpoint covers the
	// entry yet.
	AnchoredCheckpointValid *bool  `json:"anchored_checkpoint_valid,omitempty"`
	LinkExpiresAt           string `json:"link_expires_at"`
}

// Options are the reader's surroundings.
type Options struct {
	// ServerLedgerKey is the ledger verifier key of the server running the
	// reader, used when the input supplies none.
	ServerLedgerKey string
	// ShareLinks verifies share links; nil: KindShareLink is refused.
	ShareLinks ShareLinks
	// MaxUnpackedBytes bounds what a zipped pack may unpack to, from its
	// directory, before anything is unpacked; 0 leaves the bound to
	// pack.Verify's own.
	MaxUnpackedBytes uint64
}

// Report is what Verify found.
type Report struct {
	Kind Kind `json:"kind"`
	// Valid is true only when every check passed with a trusted key
	// where the kind needs one.
	Valid  bool    `json:"valid"`
	Checks []Check `json:"checks"`
	// Skipped names what was not checked, and why.
	Skipped []string `json:"skipped,omitempty"`
	Key     Key      `json:"key"`
	// Details is the kind's own report, as `clearance verify` prints it:
	// a proof.Result, CapsuleReport, ConsistencyReport, pack.Report or
	// SharedDossier.
	Details any `json:"details,omitempty"`
}

// Check is one verification step.
type Check struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Reason is a stable string (Reason*) when the check failed.
	Reason string `json:"reason,omitempty"`
	// Detail says what exactly was found, for a person.
	Detail string `json:"detail,omitempty"`
}

// Key says which key the verification trusted.
type Key struct {
	Source      string `json:"source"`
	VerifierKey string `json:"verifier_key,omitempty"`
	// Statement says it in a sentence.
	Statement string `json:"statement"`
}

// Verify verifies one artifact and reports every check with its reason.
// An artifact that does not verify is a Report with Valid false; an error
// is a refused input (ErrInvalidInput, with a Code*), or what the
// ShareLinks answered besides ErrShareLinkInvalid.
func Verify(ctx context.Context, in Input, opts Options) (Report, error) {
	kind := in.Kind
	switch {
	case kind == "" && in.ShareLink != "":
		kind = KindShareLink
	case kind == "":
		var err error
		if kind, err = Detect(in.Artifact); err != nil {
			return Report{}, err
		}
	case !knownKind(kind):
		return Report{}, invalid(CodeKindUnknown, "kind %q is none of %s", kind, kindList())
	}
	if err := checkInput(kind, in); err != nil {
		return Report{}, err
	}
	key, err := chooseKey(kind, in.LedgerKey, opts.ServerLedgerKey)
	if err != nil {
		return Report{}, err
	}
	r := Report{Kind: kind, Checks: []Check{}, Key: key}
	switch kind {
	case KindPacket:
		verifyPacket(&r, in.Artifact)
	case KindCapsule:
		rep := VerifyCapsule(in.Artifact, in.Envelopes)
		capsuleChecks(&r, rep)
	case KindLedger:
		rep := VerifyConsistency(in.Artifact, key.VerifierKey)
		consistencyChecks(&r, rep)
	case KindPack, KindManifest:
		if err := verifyPack(&r, in, opts); err != nil {
			return Report{}, err
		}
	case KindShareLink:
		if err := verifyShareLink(ctx, &r, in.ShareLink, opts.ShareLinks); err != nil {
			return Report{}, err
		}
	}
	r.Valid = len(r.Checks) > 0
	for _, c := range r.Checks {
		r.Valid = r.Valid && c.OK
	}
	return r, nil
}

func knownKind(k Kind) bool {
	for _, known := range Kinds {
		if k == known {
			return true
		}
	}
	return false
}

func kindList() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// checkInput refuses what the kind does not take.
func checkInput(kind Kind, in Input) error {
	switch {
	case kind == KindShareLink && (in.ShareLink == "" || in.Artifact != nil):
		return invalid(CodeArtifactRequired, "a share_link is verified from share_link alone")
	case kind != KindShareLink && (in.Artifact == nil || in.ShareLink != ""):
		return invalid(CodeArtifactRequired, "a %s is verified from its artifact alone", kind)
	case in.Envelopes != nil && kind != KindCapsule:
		return invalid(CodeArtifactInvalid, "envelopes go with a capsule, not a %s", kind)
	case (in.ExportRecord != nil || in.ExportKey != nil) && kind != KindPack && kind != KindManifest:
		return invalid(CodeArtifactInvalid, "an export record goes with a pack, not a %s", kind)
	case in.ExportKey != nil && in.ExportRecord == nil:
		return invalid(CodeArtifactInvalid, "an export key needs the export record whose signature it checks")
	}
	return nil
}

// chooseKey picks the trusted ledger key: the caller's, else the server's.
func chooseKey(kind Kind, caller, server string) (Key, error) {
	switch {
	case kind == KindCapsule:
		return Key{Source: KeyNotNeeded, Statement: "a capsule's Class 1 checks use no ledger key"}, nil
	case kind == KindShareLink:
		if caller != "" {
			return Key{}, invalid(CodeArtifactInvalid, "a share link is checked by its server with its own ledger key: ledger_key does not apply")
		}
		return Key{Source: KeyServer, VerifierKey: server, Statement: "checked by this server, against its own ledger and ledger key"}, nil
	case caller != "":
		return Key{Source: KeyCaller, VerifierKey: caller, Statement: "checked against the ledger key you supplied"}, nil
	case server != "":
		return Key{Source: KeyServer, VerifierKey: server, Statement: "checked against this server's ledger key"}, nil
	}
	return Key{Source: KeyNone, Statement: "no ledger key was supplied and this server has none: nothing signed could be checked"}, nil
}

// Detect tells an artifact's kind from its bytes: a zip is a pack; a JSON
// object is told by its top-level members (packet_version: a packet;
// spec_version: a capsule; old_checkpoint or new_checkpoint: a ledger
// consistency proof; manifest: a pack; pack_version: a manifest).
func Detect(artifact []byte) (Kind, error) {
	if bytes.HasPrefix(artifact, []byte("PK\x03\x04")) {
		return KindPack, nil
	}
	names := map[string]bool{}
	dec := jsontext.NewDecoder(bytes.NewReader(artifact))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return "", invalid(CodeKindUndetected, "the artifact is neither a JSON object nor a zip: name its kind")
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			break
		}
		names[tok.String()] = true
		if err := dec.SkipValue(); err != nil {
			break
		}
	}
	switch {
	case names["packet_version"]:
		return KindPacket, nil
	case names["spec_version"]:
		return KindCapsule, nil
	case names["old_checkpoint"] || names["new_checkpoint"]:
		return KindLedger, nil
	case names["manifest"]:
		return KindPack, nil
	case names["pack_version"]:
		return KindManifest, nil
	}
	return "", invalid(CodeKindUndetected, "the artifact is none of %s: name its kind", kindList())
}

// packetReasons are the reasons of proof.Verify's checks.
var packetReasons = map[string]string{
	proof.CheckFormat:         ReasonPacketMalformed,
	proof.CheckVerifierKey:    ReasonKeyNotTrusted,
	proof.CheckDossierDigest:  ReasonDossierDigest,
	proof.CheckDossierFields:  ReasonDossierFields,
	proof.CheckLedgerEntry:    ReasonLedgerEntry,
	proof.CheckLedgerAnchor:   ReasonLedgerAnchor,
	proof.CheckBundle:         ReasonBundleSignature,
	proof.CheckBundleContents: ReasonBundleStatement,
}

func verifyPacket(r *Report, raw []byte) {
	res := proof.Verify(raw, r.Key.VerifierKey)
	r.Details = res
	for _, c := range res.Checks {
		ch := Check{Name: c.Name, OK: c.OK, Detail: c.Detail}
		if !c.OK {
			ch.Reason = packetReasons[c.Name]
			if c.Name == proof.CheckVerifierKey && r.Key.Source == KeyNone {
				ch.Reason = ReasonLedgerKeyUnavailable
			}
		}
		r.Checks = append(r.Checks, ch)
	}
}

// CapsuleReport is the capsule verification `clearance verify capsule`
// prints.
type CapsuleReport struct {
	Valid     bool             `json:"valid"`
	Class1    capsule.Result   `json:"class1"`
	Envelopes []EnvelopeReport `json:"envelopes,omitempty"`
}

// EnvelopeReport is one producer envelope's check.
type EnvelopeReport struct {
	OK        bool   `json:"ok"`
	PublicKey string `json:"public_key,omitempty"` // authenticated; trusting it is the caller's policy
	Error     string `json:"error,omitempty"`
}

// VerifyCapsule runs the Class 1 checks and, when envelopes is not nil,
// every producer envelope against the recomputed capsule ID.
func VerifyCapsule(raw, envelopes []byte) CapsuleReport {
	rep := CapsuleReport{Class1: capsule.Verify(raw)}
	rep.Valid = rep.Class1.OK
	if envelopes == nil {
		return rep
	}
	var list struct {
		Envelopes []struct {
			COSESign1 []byte `json:"cose_sign1"`
		} `json:"envelopes"`
	}
	if err := json.Unmarshal(envelopes, &list); err != nil || len(list.Envelopes) == 0 || rep.Class1.IDRecomputed == nil {
		rep.Valid = false
		rep.Envelopes = []EnvelopeReport{{Error: "no envelope to check (or no capsule ID to check it against)"}}
		return rep
	}
	for _, e := range list.Envelopes {
		pub, err := capsule.VerifyEnvelope(e.COSESign1, *rep.Class1.IDRecomputed)
		if err != nil {
			rep.Valid = false
			rep.Envelopes = append(rep.Envelopes, EnvelopeReport{Error: err.Error()})
			continue
		}
		rep.Envelopes = append(rep.Envelopes, EnvelopeReport{OK: true, PublicKey: hex.EncodeToString(pub)})
	}
	return rep
}

func capsuleChecks(r *Report, rep CapsuleReport) {
	r.Details = rep
	c := Check{Name: "capsule_class1", OK: rep.Class1.OK}
	var failed []string
	for _, f := range rep.Class1.Errors() {
		failed = append(failed, fmt.Sprintf("check %d %s: %s", f.Check, f.Code, f.Detail))
	}
	if !c.OK {
		c.Reason, c.Detail = ReasonCapsuleClass1, strings.Join(failed, "; ")
	}
	r.Checks = append(r.Checks, c)
	for i, e := range rep.Envelopes {
		c := Check{Name: fmt.Sprintf("producer_envelope_%d", i+1), OK: e.OK}
		if e.OK {
			c.Detail = "signed by public key " + e.PublicKey + " (whether that key speaks for the producer is your policy)"
		} else {
			c.Reason, c.Detail = ReasonEnvelope, e.Error
		}
		r.Checks = append(r.Checks, c)
	}
	if rep.Envelopes == nil {
		r.Skipped = append(r.Skipped, "producer envelopes: none given")
	}
}

// ConsistencyReport is the consistency check `clearance verify ledger`
// prints.
type ConsistencyReport struct {
	Valid   bool   `json:"valid"`
	Origin  string `json:"origin,omitempty"`
	OldSize uint64 `json:"old_size,omitempty"`
	NewSize uint64 `json:"new_size,omitempty"`
	Error   string `json:"error,omitempty"`
	// reason is the failed check's reason.
	reason string
}

// VerifyConsistency checks both checkpoints of a consistency answer with
// the trusted key and the proof between them.
func VerifyConsistency(raw []byte, key string) ConsistencyReport {
	var in struct {
		Proof         tlog.TreeProof `json:"proof"`
		OldCheckpoint string         `json:"old_checkpoint"`
		NewCheckpoint string         `json:"new_checkpoint"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return ConsistencyReport{Error: "not a consistency proof: " + err.Error(), reason: ReasonConsistencyMalformed}
	}
	older, err := ledger.VerifyCheckpoint(key, []byte(in.OldCheckpoint))
	if err != nil {
		return ConsistencyReport{Error: "old checkpoint: " + err.Error(), reason: ReasonCheckpoint}
	}
	newer, err := ledger.VerifyCheckpoint(key, []byte(in.NewCheckpoint))
	if err != nil {
		return ConsistencyReport{Error: "new checkpoint: " + err.Error(), reason: ReasonCheckpoint}
	}
	rep := ConsistencyReport{Origin: newer.Origin, OldSize: older.Size, NewSize: newer.Size}
	switch {
	case older.Origin != newer.Origin:
		err, rep.reason = errors.New("the checkpoints are of different logs: "+older.Origin+", "+newer.Origin), ReasonLogMismatch
	case !strings.Contains(newer.Origin, "/ledger/"):
		err, rep.reason = errors.New("not a Clearance ledger origin: "+newer.Origin), ReasonLogMismatch
	default:
		err, rep.reason = ledger.VerifyConsistency(older, newer, in.Proof), ReasonConsistency
	}
	if err != nil {
		rep.Error = err.Error()
		return rep
	}
	rep.Valid, rep.reason = true, ""
	return rep
}

func consistencyChecks(r *Report, rep ConsistencyReport) {
	r.Details = rep
	c := Check{Name: "ledger_consistency", OK: rep.Valid}
	if !rep.Valid {
		c.Reason, c.Detail = rep.reason, rep.Error
		if r.Key.Source == KeyNone {
			c.Reason = ReasonLedgerKeyUnavailable
		}
	} else {
		c.Detail = fmt.Sprintf("%s grew from %d to %d entries without rewriting any", rep.Origin, rep.OldSize, rep.NewSize)
	}
	r.Checks = append(r.Checks, c)
}

func verifyPack(r *Report, in Input, opts Options) error {
	o := pack.VerifyOptions{LedgerVerifierKey: r.Key.VerifierKey}
	if rec := in.ExportRecord; rec != nil {
		o.ManifestSHA256, o.BundleSHA256 = rec.ManifestSHA256, rec.BundleSHA256
		if in.ExportKey != nil {
			o.Key, o.Signature = in.ExportKey, rec.Signature
		}
	}
	if r.Kind == KindPack && opts.MaxUnpackedBytes > 0 {
		if err := checkUnpacked(in.Artifact, opts.MaxUnpackedBytes); err != nil {
			return err
		}
	}
	var rep pack.Report
	var err error
	if r.Kind == KindManifest {
		rep, err = pack.VerifyManifest(in.Artifact, o)
	} else {
		rep, err = pack.Verify(in.Artifact, o)
	}
	r.Details = rep
	var ve *pack.VerifyError
	if err != nil && !errors.As(err, &ve) { // an export key, and a record without a signature
		r.Checks = append(r.Checks, Check{Name: "bundle_signature_hmac_sha256", Reason: pack.ReasonSignature, Detail: err.Error()})
		return nil
	}
	r.Skipped = append(r.Skipped, rep.Skipped...)
	if r.Key.Source == KeyNone {
		r.Checks = append(r.Checks, Check{Name: "checkpoint signature", Reason: ReasonLedgerKeyUnavailable,
			Detail: "no ledger key: the pack's checkpoint signature was not checked"})
	}
	if len(rep.Problems) == 0 {
		for _, name := range rep.Checked {
			r.Checks = append(r.Checks, Check{Name: name, OK: true})
		}
		return nil
	}
	for _, p := range rep.Problems {
		name := "pack"
		if p.File != "" {
			name = p.File
		}
		r.Checks = append(r.Checks, Check{Name: name, Reason: p.Reason, Detail: p.Detail})
	}
	return nil
}

// checkUnpacked refuses a zip whose directory declares more than limit
// bytes unpacked (archive/zip refuses an entry that unpacks beyond what it
// declares, so the directory bounds the work).
func checkUnpacked(b []byte, limit uint64) error {
	if !bytes.HasPrefix(b, []byte("PK\x03\x04")) {
		return nil
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil // pack.Verify reports CONTAINER_INVALID
	}
	var total uint64
	for _, f := range zr.File {
		total += f.UncompressedSize64
		if total > limit || total < f.UncompressedSize64 {
			return invalid(CodeArtifactTooLarge, "the pack unpacks to more than %d bytes: verify it with `clearance verify pack`", limit)
		}
	}
	return nil
}

// ParseShareLink reads a share link, absolute or a path with its query,
// into the dossier it names and its sig.
func ParseShareLink(link string) (dossierID, sig string, err error) {
	u, perr := url.Parse(strings.TrimSpace(link))
	bad := invalid(CodeArtifactInvalid, "share_link is not a share link: want …%s{dossierId}/verify?sig=…", pathPrefix)
	if perr != nil || u.Opaque != "" || u.User != nil || u.Fragment != "" {
		return "", "", bad
	}
	rest, ok := strings.CutPrefix(u.EscapedPath(), pathPrefix)
	if !ok {
		return "", "", bad
	}
	dossierID, ok = strings.CutSuffix(rest, "/verify")
	if !ok || dossierID == "" || strings.ContainsAny(dossierID, "/%") {
		return "", "", bad
	}
	q, qerr := url.ParseQuery(u.RawQuery)
	if qerr != nil || len(q) != 1 || len(q["sig"]) != 1 || q.Get("sig") == "" {
		return "", "", bad
	}
	return dossierID, q.Get("sig"), nil
}

// pathPrefix is the path prefix of share links
// (sharelink.PathPublicDossierVerify).
const pathPrefix = "/v1/public/decision-dossiers/"

func verifyShareLink(ctx context.Context, r *Report, link string, links ShareLinks) error {
	if links == nil {
		return invalid(CodeKindUnknown, "this reader has no server to verify share links with")
	}
	id, sig, err := ParseShareLink(link)
	if err != nil {
		return err
	}
	d, err := links.VerifyShareLink(ctx, id, sig)
	if errors.Is(err, ErrShareLinkUnsealed) {
		r.Checks = append(r.Checks, Check{Name: "share_link", OK: true, Detail: "a link of this server"},
			Check{Name: "ledger_chain", Reason: ReasonEntryNotYetSealed,
				Detail: "the dossier's ledger entry is too far past the latest signed checkpoint to check now; try again after the next checkpoint"})
		return nil
	}
	if errors.Is(err, ErrShareLinkInvalid) {
		r.Checks = append(r.Checks, Check{Name: "share_link", Reason: ReasonShareLinkInvalid,
			Detail: "this server does not honour the link: it may be malformed, tampered with, expired, revoked or of another server"})
		return nil
	}
	if err != nil {
		return err
	}
	r.Details = d
	r.Checks = append(r.Checks, Check{Name: "share_link", OK: true, Detail: "a link of this server, valid until " + d.LinkExpiresAt})
	add := func(name string, ok bool, reason, detail string) {
		c := Check{Name: name, OK: ok, Detail: detail}
		if !ok {
			c.Reason = reason
		}
		r.Checks = append(r.Checks, c)
	}
	add("dossier_digest", d.RecomputedDigestMatches, ReasonDossierDigest, "the stored dossier hashes to "+d.DossierDigest+", the digest its ledger entry recorded")
	add("ledger_entry", d.EntryHashValid, ReasonLedgerEntry, fmt.Sprintf("ledger entry %d records this dossier and recomputes", d.LedgerSeq))
	add("ledger_chain", d.ChainValid, ReasonLedgerChain, fmt.Sprintf("entry %d links into the ledger from its latest signed checkpoint (or from the first entry)", d.LedgerSeq))
	if d.AnchoredCheckpointValid == nil {
		r.Skipped = append(r.Skipped, "ledger_checkpoint: no signed checkpoint covers the entry yet")
	} else {
		add("ledger_checkpoint", *d.AnchoredCheckpointValid, ReasonCheckpoint, "the entry is included in a checkpoint signed by this server's ledger key")
	}
	return nil
}
