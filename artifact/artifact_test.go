package artifact

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func valid() Record {
	return Record{
		OrgID: "org_1", Kind: "job", ID: "job_1", Ref: "pending",
		CreatedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), Body: []byte{0xff, 0x00},
	}
}

func TestArtifactValidate(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(r *Record)
		field string // "" when valid
	}{
		{"Valid", func(r *Record) {}, ""},
		{"EmptyRef", func(r *Record) { r.Ref = "" }, ""},
		{"KindAllowedBytes", func(r *Record) { r.Kind = "a-z_0.9" }, ""},
		{"KindMaxLen", func(r *Record) { r.Kind = strings.Repeat("k", MaxKindLen) }, ""},
		{"IDMaxLen", func(r *Record) { r.ID = strings.Repeat("é", MaxIDLen/2) }, ""},
		{"UnicodeText", func(r *Record) { r.Ref = "café ☃ \U0001F600" }, ""},
		{"NilBody", func(r *Record) { r.Body = nil }, ""},
		{"Year1", func(r *Record) { r.CreatedAt = time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC) }, ""},
		{"Year9999", func(r *Record) { r.CreatedAt = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC) }, ""},

		{"EmptyOrg", func(r *Record) { r.OrgID = "" }, "org_id"},
		{"EmptyKind", func(r *Record) { r.Kind = "" }, "kind"},
		{"EmptyID", func(r *Record) { r.ID = "" }, "id"},
		{"KindUpper", func(r *Record) { r.Kind = "Job" }, "kind"},
		{"KindSpace", func(r *Record) { r.Kind = "j ob" }, "kind"},
		{"KindSlash", func(r *Record) { r.Kind = "j/ob" }, "kind"},
		{"KindNonASCII", func(r *Record) { r.Kind = "jobé" }, "kind"},
		{"KindTooLong", func(r *Record) { r.Kind = strings.Repeat("k", MaxKindLen+1) }, "kind"},
		{"IDTooLong", func(r *Record) { r.ID = strings.Repeat("i", MaxIDLen+1) }, "id"},
		{"RefTooLong", func(r *Record) { r.Ref = strings.Repeat("r", MaxIDLen+1) }, "ref"},
		{"OrgTooLong", func(r *Record) { r.OrgID = strings.Repeat("o", MaxIDLen+1) }, "org_id"},
		{"NULInOrg", func(r *Record) { r.OrgID = "org\x00" }, "org_id"},
		{"NULInID", func(r *Record) { r.ID = "\x00" }, "id"},
		{"NULInRef", func(r *Record) { r.Ref = "a\x00b" }, "ref"},
		{"NewlineInID", func(r *Record) { r.ID = "a\nb" }, "id"},
		{"TabInRef", func(r *Record) { r.Ref = "a\tb" }, "ref"},
		{"DELInID", func(r *Record) { r.ID = "a\x7f" }, "id"},
		{"C1InRef", func(r *Record) { r.Ref = "a\u0085" }, "ref"},
		{"InvalidUTF8ID", func(r *Record) { r.ID = "a\xffb" }, "id"},
		{"TruncatedUTF8Ref", func(r *Record) { r.Ref = "\xe2\x98" }, "ref"},
		{"ZeroTime", func(r *Record) { r.CreatedAt = time.Time{} }, "created_at"},
		{"Year10000", func(r *Record) { r.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "created_at"},
		{"YearZero", func(r *Record) { r.CreatedAt = time.Date(0, 6, 1, 0, 0, 0, 0, time.UTC) }, "created_at"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := valid()
			c.edit(&r)
			err := r.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) || e.Field != c.field {
				t.Fatalf("Validate = %v, want an *Error wrapping ErrInvalid on %s", err, c.field)
			}
		})
	}
}

func TestArtifactValidateFor(t *testing.T) {
	r := valid()
	if err := r.ValidateFor(r.OrgID); err != nil {
		t.Fatalf("ValidateFor(own org) = %v", err)
	}
	err := r.ValidateFor("org_2")
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrOrgMismatch) || errors.Is(err, ErrInvalid) || e.Field != "org_id" {
		t.Fatalf("ValidateFor(other org) = %v, want an *Error wrapping ErrOrgMismatch", err)
	}
	r.Kind = ""
	if err := r.ValidateFor(r.OrgID); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ValidateFor(invalid record) = %v, want ErrInvalid", err)
	}
}

func TestArtifactValidateLookups(t *testing.T) {
	for _, c := range []struct {
		name           string
		org, kind, arg string
		key, ref       bool // whether ValidateKey, ValidateRef accept
	}{
		{"Valid", "org", "job", "x", true, true},
		{"EmptyArg", "org", "job", "", false, true},
		{"EmptyOrg", "", "job", "x", false, false},
		{"BadKind", "org", "Job", "x", false, false},
		{"EmptyKind", "org", "", "x", false, false},
		{"NULArg", "org", "job", "\x00", false, false},
		{"NULOrg", "o\x00", "job", "x", false, false},
		{"InvalidUTF8Arg", "org", "job", "\xff", false, false},
		{"LongArg", "org", "job", strings.Repeat("x", MaxIDLen+1), false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := ValidateKey(c.org, c.kind, c.arg); (err == nil) != c.key || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("ValidateKey = %v, want accepted %v", err, c.key)
			}
			if err := ValidateRef(c.org, c.kind, c.arg); (err == nil) != c.ref || (err != nil && !errors.Is(err, ErrInvalid)) {
				t.Errorf("ValidateRef = %v, want accepted %v", err, c.ref)
			}
		})
	}
}
