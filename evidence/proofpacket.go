package evidence

import (
	"context"
	"crypto/ed25519"
	"encoding/json"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/proof"
)

// ProofPacket builds the org's dossier proof packet: the dossier payload,
// its policy snapshot, its ledger entry anchored in the latest signed
// checkpoint (ENTRY_NOT_YET_SEALED until the sealer covers it), an Ed25519 proof bundle by the ledger key, and the result of
// verifying all of it with the engine's own ledger key (which a third party
// repeats with the key it trusts: proof.Verify or `clearance verify packet`).
func (s *Service) ProofPacket(ctx context.Context, orgID, dossierID string) (proof.Packet, error) {
	k, err := s.cfg.Audit.LedgerKey()
	if err != nil {
		return proof.Packet{}, err
	}
	r, err := s.Dossier(ctx, orgID, dossierID)
	if err != nil {
		return proof.Packet{}, err
	}
	d, err := dossier.Decode(r.Body)
	if err != nil {
		return proof.Packet{}, core.Unavailable("read dossier", err)
	}
	anchor, err := s.cfg.Audit.LedgerAnchor(ctx, orgID, d.LedgerSeq)
	if err != nil {
		return proof.Packet{}, err
	}
	page, err := s.d.Store.LedgerEntries(ctx, orgID, d.LedgerSeq-1, 1)
	if err != nil {
		return proof.Packet{}, core.Unavailable("read ledger", err)
	}
	if len(page) != 1 || page[0].Seq != d.LedgerSeq || page[0].Kind != ledger.KindDecision || page[0].SubjectID != d.DossierID {
		return proof.Packet{}, core.New(core.ErrConflict, core.CodeLedgerBroken, "the ledger entry of dossier %s is missing", d.DossierID)
	}
	snapshot, err := json.Marshal(d.PolicySnapshot)
	if err != nil {
		return proof.Packet{}, core.Unavailable("encode policy snapshot", err)
	}
	p := proof.Packet{
		Version: proof.Version, OrgID: orgID, DossierID: d.DossierID, DecisionID: d.DecisionID,
		Dossier: r.Body, DossierDigest: r.Digest, PolicySnapshot: snapshot,
		LedgerEntry: page[0], LedgerAnchor: anchor, LedgerOrigin: s.cfg.Audit.LedgerOrigin(orgID),
		LedgerVerifierKey: k.VerifierKey(), IssuedAt: s.d.Now().Format(core.TimeFormat),
	}
	if err := proof.Sign(&p, ed25519.NewKeyFromSeed(k.Seed())); err != nil {
		return proof.Packet{}, core.Unavailable("sign proof bundle", err)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return proof.Packet{}, core.Unavailable("encode proof packet", err)
	}
	res := proof.Verify(raw, k.VerifierKey())
	p.Verification = &res
	return p, nil
}
