package privacy

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// Limits of a setting and of a subject id.
const (
	// MaxPersonal is the most personal members a setting names.
	MaxPersonal = 32
	// MaxPointerLen bounds one pointer, in bytes.
	MaxPointerLen = 256
	// MaxSubjectLen bounds a subject id, in bytes.
	MaxSubjectLen = 512
)

// KindSettingChanged is the ledger kind of a changed setting (subject: the
// org id); its payload digest is the digest of the stored setting.
const KindSettingChanged = ledger.KindDataProtectionSet

// Setting is an org's data-protection setting, as stored and answered.
type Setting struct {
	OrgID string `json:"org_id"`
	// Subject is the RFC 6901 pointer into a decision's intent that names
	// its data subject.
	Subject string `json:"subject"`
	// Personal are pointers to the intent's members holding personal data;
	// Subject's member is always sealed as well.
	Personal  []string `json:"personal"`
	UpdatedAt string   `json:"updated_at"`
	LedgerSeq uint64   `json:"ledger_seq"`
}

// settingRequest is the body of PutSetting.
type settingRequest struct {
	Subject  *string  `json:"subject"`
	Personal []string `json:"personal"`
}

// PutSetting replaces the org's data-protection setting with the one in
// body ({"subject", "personal"?}) and ledgers the change. It needs the
// engine's secrets key: a setting nothing could honour is refused.
func (s *Service) PutSetting(ctx context.Context, orgID string, body []byte) (Setting, error) {
	var req settingRequest
	if err := strictjson.Decode(body, &req, s.d.JSON); err != nil {
		return Setting{}, core.TranslateInput(err)
	}
	if req.Subject == nil {
		return Setting{}, core.Invalid(core.CodeMissingField, "subject", "subject is required")
	}
	if err := checkPointer("subject", *req.Subject); err != nil {
		return Setting{}, err
	}
	if len(req.Personal) > MaxPersonal {
		return Setting{}, core.Invalid(CodeInvalidSetting, "personal", "at most %d personal members", MaxPersonal)
	}
	personal := []string{}
	for i, p := range req.Personal {
		if err := checkPointer("personal", p); err != nil {
			return Setting{}, err
		}
		if p == *req.Subject || slices.Contains(personal, p) {
			return Setting{}, core.Invalid(CodeInvalidSetting, "personal", "personal[%d] %q is named twice (the subject's member is always sealed)", i, p)
		}
		personal = append(personal, p)
	}
	if s.d.Secrets == nil {
		return Setting{}, core.New(core.ErrUnavailable, CodeSecretsNotConfigured,
			"data protection needs the server's secrets key (--secrets-key-file) to wrap subject keys")
	}
	now := s.d.Now()
	var out Setting
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		head, err := tx.LedgerHead(ctx)
		if err != nil {
			return err
		}
		out = Setting{OrgID: orgID, Subject: *req.Subject, Personal: personal, UpdatedAt: core.Format(now), LedgerSeq: head.Seq + 1}
		raw, err := canon.Marshal(out)
		if err != nil {
			return err
		}
		if err := tx.PutArtifact(ctx, artifactOf(orgID, raw, now)); err != nil {
			return err
		}
		return core.AppendRecord(ctx, tx, KindSettingChanged, orgID, out, now)
	})
	if err != nil {
		return Setting{}, core.Translate("put data-protection setting", err)
	}
	return out, nil
}

// DeleteSetting turns the org's data protection off for the decisions
// recorded after it, and ledgers that (data_protection.set with an empty
// subject). Dossiers sealed before stay sealed, and their subjects stay
// erasable. DATA_PROTECTION_NOT_SET when the org has none.
func (s *Service) DeleteSetting(ctx context.Context, orgID string) (Setting, error) {
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return Setting{}, err
	}
	now := s.d.Now()
	var out Setting
	err := s.d.Store.Update(ctx, orgID, func(tx store.Tx) error {
		deleted, err := tx.DeleteArtifact(ctx, store.DataProtectionKind, store.DataProtectionID)
		if err != nil {
			return err
		}
		if !deleted {
			return core.New(core.ErrNotFound, CodeSettingNotFound, "the org has no data-protection setting")
		}
		head, err := tx.LedgerHead(ctx)
		if err != nil {
			return err
		}
		out = Setting{OrgID: orgID, Personal: []string{}, UpdatedAt: core.Format(now), LedgerSeq: head.Seq + 1}
		return core.AppendRecord(ctx, tx, KindSettingChanged, orgID, out, now)
	})
	if err != nil {
		return Setting{}, core.Translate("delete data-protection setting", err)
	}
	return out, nil
}

// Setting returns the org's data-protection setting, or
// DATA_PROTECTION_NOT_SET.
func (s *Service) Setting(ctx context.Context, orgID string) (Setting, error) {
	if err := s.d.Store.RequireOrg(ctx, orgID); err != nil {
		return Setting{}, err
	}
	var out Setting
	err := core.ReadCommitted(ctx, s.d.Store, orgID, store.DataProtectionKind, store.DataProtectionID, &out)
	if core.IsNotFound(err) {
		return Setting{}, core.New(core.ErrNotFound, CodeSettingNotFound, "the org has no data-protection setting")
	}
	if err != nil {
		return Setting{}, core.Unavailable("read data-protection setting", err)
	}
	return out, nil
}

// checkPointer refuses what is not an RFC 6901 pointer to a member of the
// intent: "" (the whole intent) included, and escapes other than ~0, ~1.
func checkPointer(field, p string) error {
	bad := func(why string) error {
		return core.Invalid(CodeInvalidSetting, field, "%q is not a JSON pointer to a member of the intent: %s", p, why)
	}
	switch {
	case p == "" || p[0] != '/':
		return bad("it must start with /")
	case len(p) > MaxPointerLen:
		return bad("too long")
	case !utf8.ValidString(p):
		return bad("invalid UTF-8")
	case strings.ContainsFunc(p, unicode.IsControl):
		return bad("control character")
	}
	for _, tok := range strings.Split(p[1:], "/") {
		if tok == "" {
			return bad("empty reference token")
		}
		for i := 0; i < len(tok); i++ {
			if tok[i] == '~' && (i+1 == len(tok) || (tok[i+1] != '0' && tok[i+1] != '1')) {
				return bad("~ must be followed by 0 or 1")
			}
		}
	}
	return nil
}

// decodeSetting reads the stored setting a transaction holds.
func decodeSetting(raw []byte) (Setting, error) {
	var st Setting
	err := json.Unmarshal(raw, &st)
	return st, err
}
