package clearance

import (
	"context"
	"errors"

	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/reader"
	"github.com/clearancehq/clearance/sharelink"
)

// Types of reader verification (package reader).
type (
	ReaderKind   = reader.Kind
	ReaderReport = reader.Report
	ReaderCheck  = reader.Check
	ReaderKey    = reader.Key
)

// Codes of refused reader input (400).
const (
	CodeReaderKindUnknown      = reader.CodeKindUnknown
	CodeReaderKindUndetected   = reader.CodeKindUndetected
	CodeReaderArtifactRequired = reader.CodeArtifactRequired
	CodeReaderArtifactInvalid  = reader.CodeArtifactInvalid
	CodeReaderArtifactTooLarge = reader.CodeArtifactTooLarge
	CodeReaderLedgerKeyInvalid = reader.CodeLedgerKeyInvalid
)

// MaxReaderUnpackedBytes bounds what a zipped pack posted to the reader
// may unpack to; bigger packs are for `clearance verify pack`.
const MaxReaderUnpackedBytes = 64 << 20

// VerifyArtifact is the reader: it decodes a body of POST
// /v1/reader/verify (reader.DecodeRequest) and verifies it with
// reader.Verify, against this engine's ledger key unless the body supplies
// one. Share links go to e.ShareLinks: allowShareOrg (nil: none) is given
// the org that shared a link the engine honours before its dossier is
// read, and may refuse (a rate limit); its error is returned as it is.
// It reads and writes nothing else.
func (e *Engine) VerifyArtifact(ctx context.Context, body []byte, allowShareOrg func(orgID string) error) (ReaderReport, error) {
	in, err := reader.DecodeRequest(body, e.decodeOptions())
	if err != nil {
		return ReaderReport{}, core.TranslateInput(err)
	}
	rep, err := reader.Verify(ctx, in, reader.Options{ServerLedgerKey: e.Audit.LedgerVerifierKey(),
		ShareLinks: readerShareLinks{e.ShareLinks, allowShareOrg}, MaxUnpackedBytes: MaxReaderUnpackedBytes})
	if errors.Is(err, reader.ErrInvalidInput) {
		return ReaderReport{}, core.TranslateInput(err)
	}
	return rep, err
}

// readerShareLinks is the share-link service as the reader asks it.
type readerShareLinks struct {
	s     *sharelink.Service
	allow func(orgID string) error
}

func (r readerShareLinks) VerifyShareLink(ctx context.Context, dossierID, sig string) (reader.SharedDossier, error) {
	l, err := r.s.OpenShareLink(ctx, dossierID, sig)
	if err != nil {
		return reader.SharedDossier{}, shareLinkRefusal(err)
	}
	if r.allow != nil {
		if err := r.allow(l.OrgID); err != nil {
			return reader.SharedDossier{}, err
		}
	}
	v, err := r.s.VerifySharedDossier(ctx, l)
	if err != nil {
		return reader.SharedDossier{}, shareLinkRefusal(err)
	}
	return reader.SharedDossier{DossierID: v.DossierID, Outcome: string(v.Outcome), Mode: string(v.Mode),
		DossierDigest: v.DossierDigest, RecomputedDigestMatches: v.RecomputedDigestMatches, LedgerSeq: v.Ledger.Seq,
		EntryHashValid: v.Ledger.EntryHashValid, ChainValid: v.Ledger.ChainValid,
		AnchoredCheckpointValid: v.Ledger.AnchoredCheckpointValid, LinkExpiresAt: v.LinkExpiresAt}, nil
}

// shareLinkRefusal is reader.ErrShareLinkInvalid for the one refusal of a
// link, and the service's error otherwise (the store unavailable).
func shareLinkRefusal(err error) error {
	var ce *core.Error
	switch {
	case errors.As(err, &ce) && ce.Code == sharelink.CodeShareLinkInvalid:
		return reader.ErrShareLinkInvalid
	case errors.As(err, &ce) && ce.Code == CodeEntryNotYetSealed:
		return reader.ErrShareLinkUnsealed
	}
	return err
}
