package artifact

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// Record is one stored artifact.
type Record struct {
	OrgID string
	// Kind names what the record is ("override", "dispatch", "chain"): 1
	// to MaxKindLen bytes of [a-z0-9_.-].
	Kind string
	// ID is unique within (OrgID, Kind).
	ID string
	// Ref is what the record belongs to (a dossier id, a grant id, a chain
	// id, a status); it is indexed and may be empty.
	Ref string
	// CreatedAt is set by the caller; it orders the records of one Ref.
	// Backends keep it to the microsecond (truncated).
	CreatedAt time.Time
	// Body is opaque to backends (JSON, typically) and stored byte for byte.
	Body []byte
}

// Tx is what writing artifacts needs from a backend transaction scoped to
// one org.
type Tx interface {
	// PutArtifact inserts r or replaces the record with the same (Kind, ID),
	// moving its Ref index entry if Ref or CreatedAt changed. r.OrgID must
	// be the transaction's org.
	PutArtifact(ctx context.Context, r Record) error
	// ArtifactInTx returns the org's record (kind, id) as of this
	// transaction, its own writes included; store.ErrNotFound (wrapped)
	// when there is none.
	ArtifactInTx(ctx context.Context, kind, id string) (Record, error)
	// DeleteArtifact removes the org's record (kind, id) and its index
	// entry, for records that must not outlive their purpose (a destroyed
	// key); it reports whether there was one. Most records are never
	// deleted.
	DeleteArtifact(ctx context.Context, kind, id string) (bool, error)
}

// Reader reads committed artifacts.
type Reader interface {
	// Artifact returns the org's record (kind, id); store.ErrNotFound
	// (wrapped) when there is none, also when another org has one.
	Artifact(ctx context.Context, orgID, kind, id string) (Record, error)
	// ArtifactsByRef returns the org's records of kind whose Ref is ref,
	// ordered by (CreatedAt, ID), at most limit of them (limit <= 0: all).
	ArtifactsByRef(ctx context.Context, orgID, kind, ref string, limit int) ([]Record, error)
}

// Limits of the string fields, in bytes.
const (
	MaxKindLen = 64
	// MaxIDLen bounds OrgID, ID and Ref, so that a record's index entries
	// fit every backend's index (PostgreSQL's B-tree rows are under 2.7 kB).
	MaxIDLen = 512
)

// Sentinels of the refusals; every one is returned as an *Error.
var (
	// ErrInvalid: a field (or a lookup argument) no record may have.
	ErrInvalid = errors.New("artifact: invalid")
	// ErrOrgMismatch: a record of another org than the transaction's.
	ErrOrgMismatch = errors.New("artifact: org mismatch")
)

// Error is a refused record or lookup. Field names the offending field
// ("org_id", "kind", "id", "ref", "created_at"); Err is ErrInvalid or
// ErrOrgMismatch.
type Error struct {
	Field  string
	Reason string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v: %s: %s", e.Err, e.Field, e.Reason)
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

func invalid(field, format string, args ...any) *Error {
	return &Error{Field: field, Reason: fmt.Sprintf(format, args...), Err: ErrInvalid}
}

// Validate reports why r cannot be stored, or nil. OrgID and ID must be
// non-empty and Kind valid (see Record); OrgID, ID and Ref are valid UTF-8
// of at most MaxIDLen bytes without control characters (NUL included);
// CreatedAt is set and within the years 1 to 9999. Body is not examined.
func (r Record) Validate() error {
	if err := checkKey(r.OrgID, r.Kind, r.ID); err != nil {
		return err
	}
	if err := checkString("ref", r.Ref, 0); err != nil {
		return err
	}
	if r.CreatedAt.IsZero() {
		return invalid("created_at", "not set")
	}
	if y := r.CreatedAt.UTC().Year(); y < 1 || y > 9999 {
		return invalid("created_at", "year %d outside 1..9999", y)
	}
	return nil
}

// ValidateFor is Validate for a write in a transaction of orgID: a record
// of another org is refused with ErrOrgMismatch.
func (r Record) ValidateFor(orgID string) error {
	if r.OrgID != orgID {
		return &Error{Field: "org_id", Reason: fmt.Sprintf("record of org %q in a transaction of org %q", r.OrgID, orgID), Err: ErrOrgMismatch}
	}
	return r.Validate()
}

// ValidateKey reports why (orgID, kind, id) cannot name a record, or nil:
// the arguments of Artifact and (with the transaction's org) ArtifactInTx.
func ValidateKey(orgID, kind, id string) error { return checkKey(orgID, kind, id) }

// ValidateRef reports why no record of orgID can have kind and ref, or nil:
// the arguments of ArtifactsByRef.
func ValidateRef(orgID, kind, ref string) error {
	if err := checkString("org_id", orgID, 1); err != nil {
		return err
	}
	if err := checkKind(kind); err != nil {
		return err
	}
	return checkString("ref", ref, 0)
}

func checkKey(orgID, kind, id string) error {
	if err := checkString("org_id", orgID, 1); err != nil {
		return err
	}
	if err := checkKind(kind); err != nil {
		return err
	}
	return checkString("id", id, 1)
}

func checkKind(kind string) error {
	if kind == "" {
		return invalid("kind", "empty")
	}
	if len(kind) > MaxKindLen {
		return invalid("kind", "%d bytes, more than %d", len(kind), MaxKindLen)
	}
	for i := 0; i < len(kind); i++ {
		c := kind[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return invalid("kind", "byte %#02x at %d is not one of [a-z0-9_.-]", c, i)
		}
	}
	return nil
}

// checkString checks a string field of at least min bytes.
func checkString(field, s string, min int) error {
	if len(s) < min {
		return invalid(field, "empty")
	}
	if len(s) > MaxIDLen {
		return invalid(field, "%d bytes, more than %d", len(s), MaxIDLen)
	}
	for i, c := range s {
		if c == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return invalid(field, "invalid UTF-8 at byte %d", i)
			}
		}
		if unicode.IsControl(c) {
			return invalid(field, "control character %U at byte %d", c, i)
		}
	}
	return nil
}
