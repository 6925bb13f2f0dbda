package privacy

import (
	"time"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/store"
)

// Config is the feature's settings; the zero value is the default.
type Config struct{}

// Service is the data-protection feature.
type Service struct {
	d   core.Deps
	cfg Config
}

// New returns the data-protection feature over the kernel d.
func New(d core.Deps, cfg Config) *Service { return &Service{d: d, cfg: cfg} }

// Artifact kinds of the feature.
const (
	// kindSubjectKey: one per data subject, ID = the subject's MAC, Ref =
	// refKey (so an org's keys list with one indexed read). Deleted by an
	// erasure.
	kindSubjectKey = "privacy.subject_key"
	refKey         = "key"
	// kindKeyIndex: key id → the subject's MAC, for readers, who know only
	// the key id a dossier names. Deleted with the key.
	kindKeyIndex = "privacy.key"
	// kindErasure: the latest erasure receipt of a subject (ID = its MAC)
	// or of the whole org (ID = idOrgErasure).
	kindErasure  = "privacy.erasure"
	idOrgErasure = "org"
)

func artifactOf(orgID string, body []byte, at time.Time) artifact.Record {
	return artifact.Record{OrgID: orgID, Kind: store.DataProtectionKind, ID: store.DataProtectionID, CreatedAt: at, Body: body}
}
