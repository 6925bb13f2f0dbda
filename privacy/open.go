package privacy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/secretbox"
)

// Status of a dossier's personal data, as a reader sees it.
const (
	// StatusOpen: the subject's key exists; the values are restored.
	StatusOpen = "OPEN"
	// StatusErased: the subject's key was destroyed; the values are gone
	// and dossier.ErasedMarker stands in their place.
	StatusErased = "ERASED"
)

// View is a dossier as a reader is shown it.
type View struct {
	// Body is the stored body when Status is "" (nothing sealed); else the
	// body with the values restored (OPEN) or marked erased (ERASED), and
	// personal_data.status saying which. Only the stored body hashes to the
	// ledgered digest.
	Body   []byte
	Status string
}

// Sealed reports whether a stored dossier body carries sealed personal
// data, without decoding it.
func Sealed(body []byte) bool { return bytes.Contains(body, []byte(`"personal_data":{`)) }

// Open returns the org's stored dossier body as a reader is shown it.
func (s *Service) Open(ctx context.Context, orgID string, body []byte) (View, error) {
	if !Sealed(body) {
		return View{Body: body}, nil
	}
	tree, pd, err := decodeSealed(body)
	if err != nil {
		return View{}, core.Unavailable("read dossier", err)
	}
	if pd == nil {
		return View{Body: body}, nil
	}
	values, err := s.values(ctx, orgID, tree, pd)
	if err != nil {
		return View{}, err
	}
	status := StatusOpen
	if values == nil {
		status = StatusErased
	}
	if _, err := restore(tree, pd, values); err != nil {
		return View{}, core.Unavailable("read dossier", err)
	}
	if m, ok := tree["personal_data"].(map[string]any); ok {
		m["status"] = status
	}
	out, err := canon.Marshal(tree)
	if err != nil {
		return View{}, core.Unavailable("encode dossier", err)
	}
	return View{Body: out, Status: status}, nil
}

// OpenRecorded returns the stored dossier body with its personal values
// restored, for evaluating it again (replay, reproduce): the stored body
// itself when nothing is sealed, ErrErased (wrapped) when the subject was
// erased.
func (s *Service) OpenRecorded(ctx context.Context, orgID string, body []byte) ([]byte, error) {
	if !Sealed(body) {
		return body, nil
	}
	tree, pd, err := decodeSealed(body)
	if err != nil || pd == nil {
		return body, err
	}
	values, err := s.values(ctx, orgID, tree, pd)
	if err != nil {
		return nil, err
	}
	if values == nil {
		return nil, fmt.Errorf("%w: key %s was destroyed", ErrErased, pd.KeyID)
	}
	out, err := restore(tree, pd, values)
	if err != nil {
		return nil, err
	}
	delete(out, "personal_data")
	return canon.Marshal(out)
}

// values opens the sealed values; nil when the key is destroyed.
func (s *Service) values(ctx context.Context, orgID string, tree map[string]any, pd *dossier.PersonalData) ([]json.RawMessage, error) {
	box, err := s.boxOf(ctx, orgID, pd.KeyID)
	if err != nil || box == nil {
		return nil, err
	}
	unreadable := core.New(core.ErrUnavailable, CodePersonalDataUnreadable, "the dossier's personal data does not open")
	dossierID, _ := tree["dossier_id"].(string)
	plain, err := box.Open(pd.Ciphertext, dossierContext(orgID, dossierID))
	if err != nil {
		return nil, unreadable
	}
	var values []json.RawMessage
	if err := json.Unmarshal(plain, &values); err != nil || len(values) != len(pd.Members) {
		return nil, unreadable
	}
	return values, nil
}

// boxOf opens the org's subject key keyID; nil when it was destroyed.
func (s *Service) boxOf(ctx context.Context, orgID, keyID string) (*secretbox.Box, error) {
	if !core.ValidID(keyID) {
		return nil, core.New(core.ErrUnavailable, CodePersonalDataUnreadable, "the sealed record names no valid subject key")
	}
	ix, err := s.d.Store.Artifact(ctx, orgID, kindKeyIndex, keyID)
	if core.IsNotFound(err) {
		return nil, nil // destroyed
	}
	if err != nil {
		return nil, core.Unavailable("read subject key", err)
	}
	rec, err := s.d.Store.Artifact(ctx, orgID, kindSubjectKey, string(ix.Body))
	if core.IsNotFound(err) {
		return nil, nil // destroyed
	}
	if err != nil {
		return nil, core.Unavailable("read subject key", err)
	}
	unreadable := core.New(core.ErrUnavailable, CodePersonalDataUnreadable, "a subject key does not open with the server's secrets key")
	if s.d.Secrets == nil {
		return nil, core.New(core.ErrUnavailable, CodeSecretsNotConfigured, "opening personal data needs the server's secrets key")
	}
	var k subjectKey
	if err := json.Unmarshal(rec.Body, &k); err != nil {
		return nil, unreadable
	}
	if k.KeyID != keyID {
		return nil, nil // the subject's key was destroyed and a new one made since
	}
	data, err := s.d.Secrets.Open(k.Wrapped, keyContext(orgID, k.KeyID))
	if err != nil {
		return nil, unreadable
	}
	box, err := secretbox.New(data)
	if err != nil {
		return nil, unreadable
	}
	return box, nil
}

// OpenSealed opens what a decision's Sealer sealed for context in the
// org's records (a grant's bound intent, an answer's grant token, an
// escalation's intent): the plaintext while the subject's key exists;
// erased true, and no plaintext, once it was destroyed. A ciphertext that
// does not open under an existing key (moved from another record,
// tampered with) is PERSONAL_DATA_UNREADABLE (503), never plaintext.
func (s *Service) OpenSealed(ctx context.Context, orgID string, sealed dossier.Sealed, context string) ([]byte, bool, error) {
	box, err := s.boxOf(ctx, orgID, sealed.KeyID)
	if err != nil {
		return nil, false, err
	}
	if box == nil {
		return nil, true, nil
	}
	plain, err := box.Open(sealed.Ciphertext, recordContext(context))
	if err != nil {
		return nil, false, core.New(core.ErrUnavailable, CodePersonalDataUnreadable, "a sealed record's personal data does not open")
	}
	return plain, false, nil
}

// decodeSealed decodes a stored body into a tree (numbers kept exact) and
// its personal_data.
func decodeSealed(body []byte) (map[string]any, *dossier.PersonalData, error) {
	var tree map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil, nil, err
	}
	b, err := dossier.Decode(body)
	if err != nil {
		return nil, nil, err
	}
	return tree, b.PersonalData, nil
}

// restore writes values (nil: ErasedMarker) into tree at pd's members, the
// last first, so that a member inside another sealed member is restored
// after its container.
func restore(tree map[string]any, pd *dossier.PersonalData, values []json.RawMessage) (map[string]any, error) {
	for i := len(pd.Members) - 1; i >= 0; i-- {
		if checkPointer("member", pd.Members[i]) != nil {
			return nil, fmt.Errorf("privacy: member %q is not a pointer", pd.Members[i])
		}
		_, set, ok := lookup(tree, pd.Members[i])
		if !ok {
			return nil, fmt.Errorf("privacy: member %q is not in the dossier", pd.Members[i])
		}
		if values == nil {
			set(dossier.ErasedMarker)
			continue
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(values[i]))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		set(v)
	}
	return tree, nil
}

// OpenRecordedFor is OpenRecorded in the shape replays take
// (policies.PersonalOpener): erased instead of ErrErased.
func (s *Service) OpenRecordedFor(ctx context.Context, orgID string, body []byte) ([]byte, bool, error) {
	plain, err := s.OpenRecorded(ctx, orgID, body)
	if errors.Is(err, ErrErased) {
		return nil, true, nil
	}
	return plain, false, err
}
