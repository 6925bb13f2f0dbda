package core

import (
	"context"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
)

// ReadDossier reads and decodes the org's dossier, with the digest of its
// stored body: DOSSIER_NOT_FOUND for an id that is not a UUID, another
// org's or none; STORE_UNAVAILABLE when the store fails or the body no
// longer decodes.
func ReadDossier(ctx context.Context, r dossier.Reader, orgID, dossierID string) (dossier.Body, string, error) {
	if !ValidID(dossierID) {
		return dossier.Body{}, "", New(ErrNotFound, CodeDossierNotFound, "dossier not found")
	}
	rec, err := r.Dossier(ctx, orgID, dossierID)
	if IsNotFound(err) {
		return dossier.Body{}, "", New(ErrNotFound, CodeDossierNotFound, "dossier not found")
	}
	if err != nil {
		return dossier.Body{}, "", Unavailable("read dossier", err)
	}
	b, err := dossier.Decode(rec.Body)
	if err != nil {
		return dossier.Body{}, "", Unavailable("read dossier", err)
	}
	return b, canon.Digest(rec.Body), nil
}
