package approver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/go-webauthn/webauthn/webauthn"
)

// snapshotVersion is the "version" of the state the service writes.
const snapshotVersion = 1

// snapshot is the durable state: what a Store keeps, written whole on every
// change. Challenges are not in it: a ceremony in flight when the service
// stops is begun again.
type snapshot struct {
	Version     int                 `json:"version"`
	Requests    []*requestRecord    `json:"requests"`
	Approvers   []*approverRecord   `json:"approvers"`
	Enrollments []*enrollmentRecord `json:"enrollments"`
}

// requestRecord is a stored approval request. Its status is never EXPIRED:
// that is judged when it is read.
type requestRecord struct {
	ID           string    `json:"id"`
	Org          string    `json:"org"`
	EscalationID string    `json:"escalation_id"`
	IntentHash   string    `json:"intent_hash"`
	Actor        Actor     `json:"actor"`
	Action       Action    `json:"action"`
	ExpiresAt    time.Time `json:"expires_at"`
	CreatedAt    time.Time `json:"created_at"`
	Status       Status    `json:"status"` // PENDING, APPROVED, DENIED, CANCELLED or REVOKED
	DecidedAt    time.Time `json:"decided_at,omitzero"`
	Approver     string    `json:"approver,omitempty"`
	Receipt      string    `json:"receipt,omitempty"`
	CancelledAt  time.Time `json:"cancelled_at,omitzero"`
	RevokedAt    time.Time `json:"revoked_at,omitzero"`
	// Token is the approval page's locator. It is kept (not only its hash)
	// because every answer to Clearance carries the page's URL.
	Token string `json:"token"`
}

// status is r's status at now.
func (r *requestRecord) status(now time.Time) Status {
	if r.Status == StatusPending && !now.Before(r.ExpiresAt) {
		return StatusExpired
	}
	return r.Status
}

// approverRecord is an enrolled human of one org.
type approverRecord struct {
	Org         string             `json:"org"`
	ID          string             `json:"id"`
	DisplayName string             `json:"display_name"`
	Handle      []byte             `json:"handle"` // the WebAuthn user handle: random, never the id
	CreatedAt   time.Time          `json:"created_at"`
	Credentials []credentialRecord `json:"credentials"`
}

// credentialRecord is a registered passkey: its public key and what the
// assertions need checked against it. It is never shown by the API.
type credentialRecord struct {
	ID                []byte    `json:"id"`
	PublicKey         []byte    `json:"public_key"` // COSE
	AttestationType   string    `json:"attestation_type,omitempty"`
	AttestationFormat string    `json:"attestation_format,omitempty"`
	Transports        []string  `json:"transports,omitempty"`
	UserPresent       bool      `json:"user_present"`
	UserVerified      bool      `json:"user_verified"`
	BackupEligible    bool      `json:"backup_eligible"`
	BackupState       bool      `json:"backup_state"`
	AAGUID            []byte    `json:"aaguid,omitempty"`
	SignCount         uint32    `json:"sign_count"`
	CreatedAt         time.Time `json:"created_at"`
}

// enrollmentRecord is an open enrollment link; only the SHA-256 of its
// token is kept.
type enrollmentRecord struct {
	TokenHash  string    `json:"token_hash"` // hex SHA-256
	Org        string    `json:"org"`
	ApproverID string    `json:"approver_id"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// state is the service's memory: the records and their indexes, and the
// ceremonies in flight. Service.mu guards it.
type state struct {
	requests   map[string]*requestRecord // by id
	byEsc      map[escKey]*requestRecord
	byToken    map[[32]byte]*requestRecord // by SHA-256 of the token
	approvers  map[string]map[string]*approverRecord
	byCred     map[string]*approverRecord // by credential id
	enrollment map[string]*enrollmentRecord
	// Ceremonies in flight, never stored.
	regSessions map[string]*regSession      // by enrollment token hash
	challenges  map[string]*assertChallenge // by challenge (base64url)
	perRequest  map[string][]string         // challenges of a request, oldest first
}

type escKey struct{ org, esc string }

// regSession is a registration ceremony begun at an enrollment link.
type regSession struct {
	session webauthn.SessionData
	expires time.Time
}

// assertChallenge is an assertion ceremony begun on the approval page: its
// challenge is bound to one request and one decision, and is used once.
type assertChallenge struct {
	requestID string
	decision  Status
	session   webauthn.SessionData
	expires   time.Time
}

func newState() *state {
	return &state{
		requests:    map[string]*requestRecord{},
		byEsc:       map[escKey]*requestRecord{},
		byToken:     map[[32]byte]*requestRecord{},
		approvers:   map[string]map[string]*approverRecord{},
		byCred:      map[string]*approverRecord{},
		enrollment:  map[string]*enrollmentRecord{},
		regSessions: map[string]*regSession{},
		challenges:  map[string]*assertChallenge{},
		perRequest:  map[string][]string{},
	}
}

func tokenHash(token string) [32]byte { return sha256.Sum256([]byte(token)) }

func tokenHashHex(token string) string {
	h := tokenHash(token)
	return hex.EncodeToString(h[:])
}

func (st *state) addRequest(r *requestRecord) {
	st.requests[r.ID] = r
	st.byEsc[escKey{r.Org, r.EscalationID}] = r
	st.byToken[tokenHash(r.Token)] = r
}

func (st *state) removeRequest(r *requestRecord) {
	delete(st.requests, r.ID)
	delete(st.byEsc, escKey{r.Org, r.EscalationID})
	delete(st.byToken, tokenHash(r.Token))
	for _, c := range st.perRequest[r.ID] {
		delete(st.challenges, c)
	}
	delete(st.perRequest, r.ID)
}

func (st *state) putApprover(a *approverRecord) {
	m := st.approvers[a.Org]
	if m == nil {
		m = map[string]*approverRecord{}
		st.approvers[a.Org] = m
	}
	m[a.ID] = a
	for _, c := range a.Credentials {
		st.byCred[string(c.ID)] = a
	}
}

// load rebuilds the state from a stored snapshot.
func (st *state) load(data []byte) error {
	var snap snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("approver: reading the stored state: %w", err)
	}
	if snap.Version != snapshotVersion {
		return fmt.Errorf("approver: the stored state has version %d, this build reads %d", snap.Version, snapshotVersion)
	}
	for _, r := range snap.Requests {
		if r == nil || r.ID == "" || r.Token == "" {
			return fmt.Errorf("approver: the stored state holds a malformed request")
		}
		st.addRequest(r)
	}
	for _, a := range snap.Approvers {
		if a == nil || a.Org == "" || a.ID == "" || len(a.Handle) == 0 {
			return fmt.Errorf("approver: the stored state holds a malformed approver")
		}
		st.putApprover(a)
	}
	for _, e := range snap.Enrollments {
		if e == nil || e.TokenHash == "" {
			return fmt.Errorf("approver: the stored state holds a malformed enrollment")
		}
		st.enrollment[e.TokenHash] = e
	}
	return nil
}

// encode is the snapshot of the durable state.
func (st *state) encode() ([]byte, error) {
	snap := snapshot{Version: snapshotVersion, Requests: []*requestRecord{}, Approvers: []*approverRecord{}, Enrollments: []*enrollmentRecord{}}
	for _, r := range st.requests {
		snap.Requests = append(snap.Requests, r)
	}
	for _, m := range st.approvers {
		for _, a := range m {
			snap.Approvers = append(snap.Approvers, a)
		}
	}
	for _, e := range st.enrollment {
		snap.Enrollments = append(snap.Enrollments, e)
	}
	return json.Marshal(snap)
}

// prune forgets what can no longer be used: requests whose expiry is more
// than retention ago, expired enrollment links, and expired ceremonies.
func (st *state) prune(now time.Time, retention time.Duration) {
	for _, r := range st.requests {
		if now.Sub(r.ExpiresAt) > retention {
			st.removeRequest(r)
		}
	}
	for h, e := range st.enrollment {
		if !now.Before(e.ExpiresAt) {
			delete(st.enrollment, h)
			delete(st.regSessions, h)
		}
	}
	for c, ch := range st.challenges {
		if !now.Before(ch.expires) {
			st.dropChallenge(c, ch.requestID)
		}
	}
}

// dropChallenge forgets challenge c of request id.
func (st *state) dropChallenge(c, id string) {
	delete(st.challenges, c)
	list := st.perRequest[id]
	for i, x := range list {
		if x == c {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(st.perRequest, id)
	} else {
		st.perRequest[id] = list
	}
}
