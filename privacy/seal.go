package privacy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/clearancehq/clearance/artifact"
	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/secretbox"
	"github.com/clearancehq/clearance/store"
)

// subjectKey is the stored record of one data subject's key.
type subjectKey struct {
	KeyID string `json:"key_id"`
	// Wrapped is the 256-bit data key sealed by the engine's secrets key
	// (context keyContext).
	Wrapped   string `json:"wrapped"`
	CreatedAt string `json:"created_at"`
	// Dossiers counts the dossiers sealed under the key.
	Dossiers int `json:"dossiers"`
}

func keyContext(orgID, keyID string) string         { return "privacy/subject-key/" + orgID + "/" + keyID }
func dossierContext(orgID, dossierID string) string { return "dossier/" + orgID + "/" + dossierID }

// subjectRef is the keyed MAC that names a subject in the store: the
// subject id itself is never stored, and without the secrets key a copy of
// the store cannot tell whether a guessed id was a subject.
func (s *Service) subjectRef(orgID, subject string) string {
	return hex.EncodeToString(s.d.Secrets.MAC([]byte(subject), "privacy/subject/"+orgID))
}

// dossierRef names the key of a dossier whose personal data has no
// subject: a MAC of its id under a context of its own, so that no subject
// id, whatever an intent holds, names the same key.
func (s *Service) dossierRef(orgID, dossierID string) string {
	return hex.EncodeToString(s.d.Secrets.MAC([]byte(dossierID), "privacy/dossier/"+orgID))
}

// Seal returns the dossier b as the org's data-protection setting has it
// stored: a sealed copy when the setting applies and b's intent holds one
// of its members, else nil (b is stored as it is). With a sealed copy it
// returns the Sealer of the decision's other records (its grant, its
// idempotent answer, its managed escalation), which seals under the same
// subject key; nil otherwise. It runs in the decision's transaction and
// never changes b (the transaction may run again). An org without a
// setting costs no read.
func (s *Service) Seal(ctx context.Context, tx store.Tx, b *dossier.Body) (*dossier.Body, dossier.Sealer, error) {
	raw, err := tx.DataProtectionInTx(ctx)
	if err != nil || len(raw) == 0 {
		return nil, nil, err
	}
	out, sealer, err := s.seal(ctx, tx, b, raw)
	if err != nil || out == nil {
		return nil, nil, err
	}
	return out, sealer, nil
}

// seal is Seal under the stored setting raw.
func (s *Service) seal(ctx context.Context, tx store.Tx, b *dossier.Body, raw []byte) (*dossier.Body, *recordSealer, error) {
	st, err := decodeSetting(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("privacy: stored setting does not decode: %w", err)
	}
	var intent any
	dec := json.NewDecoder(bytes.NewReader(b.Intent))
	dec.UseNumber()
	if err := dec.Decode(&intent); err != nil {
		return nil, nil, fmt.Errorf("privacy: intent does not decode: %w", err)
	}
	subject := ""
	if v, _, ok := lookup(intent, st.Subject); ok {
		switch v := v.(type) {
		case string:
			subject = v
		case json.Number:
			subject = v.String()
		}
	}
	var members []string
	var values []any
	actorSealed := false
	for _, p := range append([]string{st.Subject}, st.Personal...) {
		v, set, ok := lookup(intent, p)
		if !ok {
			continue
		}
		members, values = append(members, "/intent"+p), append(values, v)
		set(dossier.SealedMarker)
		// The dossier's actor.id copies the intent's: sealed with it, or
		// with anything that holds it (/actor, the whole intent).
		actorSealed = actorSealed || p == "/actor/id" || strings.HasPrefix("/actor/id", p+"/")
	}
	if len(members) == 0 {
		return nil, nil, nil
	}

	if s.d.Secrets == nil {
		return nil, nil, core.New(core.ErrUnavailable, CodeSecretsNotConfigured,
			"the org's data-protection setting needs the server's secrets key; the decision is not recorded in the clear")
	}
	out := *b
	c, err := canon.Marshal(intent)
	if err != nil {
		return nil, nil, err
	}
	out.SetCanonicalIntent(c)
	seal := func(member string, v any) {
		members, values = append(members, member), append(values, v)
	}
	seal("/intent_as_received", b.IntentAsReceived)
	out.IntentAsReceived = dossier.SealedMarker
	if actorSealed && b.Actor.ID != "" {
		seal("/actor/id", b.Actor.ID)
		out.Actor.ID = dossier.SealedMarker
	}
	if b.Approval != nil {
		a := *b.Approval
		seal("/approval/approver", a.Approver)
		seal("/approval/receipt", a.Receipt)
		a.Approver, a.Receipt = dossier.SealedMarker, dossier.SealedMarker
		out.Approval = &a
	}
	if b.Checkout != nil {
		ck := *b.Checkout
		seal("/checkout/evaluated_intent", json.RawMessage(ck.EvaluatedIntent))
		ck.EvaluatedIntent = json.RawMessage(`"` + dossier.SealedMarker + `"`)
		out.Checkout = &ck
	}
	plain, err := json.Marshal(values)
	if err != nil {
		return nil, nil, err
	}
	ref := ""
	if subject != "" {
		ref = s.subjectRef(b.OrgID, subject)
	} else {
		// Personal data without a subject to erase it by (the subject's
		// member absent, or not a string or number): a key of the
		// dossier's own, which no two people share and an erasure of the
		// org's personal data destroys.
		ref = s.dossierRef(b.OrgID, b.DossierID)
	}
	keyID, box, err := s.keyFor(ctx, tx, ref)
	if err != nil {
		return nil, nil, err
	}
	ct, err := box.Seal(plain, dossierContext(b.OrgID, b.DossierID))
	if err != nil {
		return nil, nil, core.Unavailable("seal personal data", err)
	}
	out.PersonalData = &dossier.PersonalData{Profile: dossier.PersonalDataProfile, KeyID: keyID, Members: members, Ciphertext: ct}
	return &out, &recordSealer{keyID: keyID, box: box}, nil
}

// keyFor returns the key named ref (a subjectRef or dossierRef), made on
// its first sealed dossier, and counts one more dossier under it.
func (s *Service) keyFor(ctx context.Context, tx store.Tx, ref string) (string, *secretbox.Box, error) {
	org := tx.OrgID()
	var k subjectKey
	var data []byte
	r, err := tx.ArtifactInTx(ctx, kindSubjectKey, ref)
	switch {
	case core.IsNotFound(err):
		if k.KeyID, err = s.d.IDs.New(); err != nil {
			return "", nil, err
		}
		data = make([]byte, 32)
		if _, err := rand.Read(data); err != nil {
			return "", nil, core.Unavailable("make subject key", err)
		}
		if k.Wrapped, err = s.d.Secrets.Seal(data, keyContext(org, k.KeyID)); err != nil {
			return "", nil, core.Unavailable("wrap subject key", err)
		}
		k.CreatedAt = core.Format(s.d.Now())
		if err := tx.PutArtifact(ctx, artifact.Record{OrgID: org, Kind: kindKeyIndex, ID: k.KeyID,
			CreatedAt: s.d.Now(), Body: []byte(ref)}); err != nil {
			return "", nil, err
		}
	case err != nil:
		return "", nil, err
	default:
		if err := json.Unmarshal(r.Body, &k); err != nil {
			return "", nil, fmt.Errorf("privacy: subject key does not decode: %w", err)
		}
		if data, err = s.d.Secrets.Open(k.Wrapped, keyContext(org, k.KeyID)); err != nil {
			return "", nil, core.New(core.ErrUnavailable, CodePersonalDataUnreadable, "a subject key does not open with the server's secrets key")
		}
	}
	box, err := secretbox.New(data)
	if err != nil {
		return "", nil, err
	}
	k.Dossiers++
	body, err := json.Marshal(k)
	if err != nil {
		return "", nil, err
	}
	if err := tx.PutArtifact(ctx, artifact.Record{OrgID: org, Kind: kindSubjectKey, ID: ref, Ref: refKey,
		CreatedAt: s.d.Now(), Body: body}); err != nil {
		return "", nil, err
	}
	return k.KeyID, box, nil
}

// recordSealer seals a decision's other records under the key its dossier
// was sealed with (dossier.Sealer).
type recordSealer struct {
	keyID string
	box   *secretbox.Box
}

// recordContext is the additional data of a record sealed for context: a
// namespace of its own, so that nothing sealed for a record opens as a
// dossier's values, or the reverse.
func recordContext(context string) string { return "record/" + context }

func (r *recordSealer) Seal(plain []byte, context string) (dossier.Sealed, error) {
	ct, err := r.box.Seal(plain, recordContext(context))
	if err != nil {
		return dossier.Sealed{}, core.Unavailable("seal personal data", err)
	}
	return dossier.Sealed{KeyID: r.keyID, Ciphertext: ct}, nil
}
