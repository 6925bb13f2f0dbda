package approver

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/strictjson"
)

// Defaults of Options.
const (
	DefaultMaxLifetime   = 7 * 24 * time.Hour
	DefaultEnrollmentTTL = 24 * time.Hour
	DefaultChallengeTTL  = 5 * time.Minute
	DefaultRetention     = 30 * 24 * time.Hour
	DefaultMaxBodyBytes  = 64 << 10
	// DefaultRPDisplayName is the relying party's name authenticators show.
	DefaultRPDisplayName = "Clearance approvals"
	// maxChallengesPerRequest bounds the ceremonies begun on one request
	// and not yet finished; the oldest is forgotten first.
	maxChallengesPerRequest = 64
	// minCredentialLength is the shortest Clearance credential accepted.
	minCredentialLength = 16
)

// Options configure a Service.
type Options struct {
	// Issuer is the iss of the receipts the service signs: the issuer
	// Clearance is configured to expect for this service. Default PublicURL.
	Issuer string
	// PublicURL is the absolute http(s) base URL at which humans reach the
	// service, e.g. https://approvals.example.com; approval and enrollment
	// links are built on it. Required. A path prefix is kept in the links
	// (the service itself serves its routes at the root, so a proxy in
	// front strips it); the pages use relative links.
	PublicURL string
	// RPID is the WebAuthn relying-party id, a domain (not an IP address):
	// PublicURL's host or a registrable suffix of it. Default PublicURL's
	// host.
	RPID string
	// RPOrigins are the origins from which the pages' ceremonies are
	// accepted. Default PublicURL's origin.
	RPOrigins []string
	// RPDisplayName is the relying party's name, as authenticators show it.
	// Default DefaultRPDisplayName.
	RPDisplayName string
	// SigningKey signs the receipts. Required.
	SigningKey grant.Key
	// Credentials are Clearance's API credentials, each bound to one org:
	// credential → org id. Only their SHA-256 is kept.
	Credentials map[string]string
	// CredentialHashes are more credentials given by their SHA-256
	// (HashCredential) → org id.
	CredentialHashes map[[32]byte]string
	// Now is the service's clock. Default time.Now.
	Now func() time.Time
	// Store keeps the state durably; nil keeps it in memory only.
	Store Store
	// Logger receives the service's logs. It never logs a credential, a
	// link's token, an assertion or a key. Default slog.Default().
	Logger *slog.Logger
	// OnDecision is called once for every decision a human records
	// (APPROVED or DENIED), after it is durable, with the request as it
	// then stands. It is called from the deciding request's goroutine and
	// must not block: NewCompletionNotifier's Notify returns at once.
	OnDecision func(ApprovalRequest)
	// MaxLifetime bounds expires_at - now when a request is opened.
	// Default DefaultMaxLifetime.
	MaxLifetime time.Duration
	// EnrollmentTTL is how long an enrollment link stays usable. Default
	// DefaultEnrollmentTTL.
	EnrollmentTTL time.Duration
	// ChallengeTTL is how long a WebAuthn challenge stays usable. Default
	// DefaultChallengeTTL.
	ChallengeTTL time.Duration
	// Retention is how long after its expires_at a request is kept (and
	// answered); it is then forgotten. Default DefaultRetention.
	Retention time.Duration
	// MaxBodyBytes caps request bodies (413 beyond). Default
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// HashCredential is the SHA-256 of a Clearance credential, the form
// Options.CredentialHashes takes.
func HashCredential(credential string) [32]byte { return sha256.Sum256([]byte(credential)) }

// Service is the approval service: an http.Handler serving Clearance's API,
// the JWKS and the approvers' pages. It is safe for concurrent use.
type Service struct {
	opts      Options
	publicURL string // without a trailing slash
	issuer    string
	log       *slog.Logger
	now       func() time.Time
	wa        *webauthn.WebAuthn
	creds     []credEntry
	jwks      []byte
	mux       *http.ServeMux

	mu sync.Mutex
	st *state

	// afterVerify, when set by a test, runs between an assertion's
	// verification and the recording of its decision.
	afterVerify func()
}

type credEntry struct {
	hash [32]byte
	org  string
}

// New checks opts and returns the service, its state loaded from
// opts.Store.
func New(opts Options) (*Service, error) {
	if opts.SigningKey.IsZero() {
		return nil, errors.New("approver: Options.SigningKey is required")
	}
	pu, err := url.Parse(opts.PublicURL)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || pu.User != nil || pu.RawQuery != "" || pu.Fragment != "" {
		return nil, fmt.Errorf("approver: Options.PublicURL %q must be an absolute http(s) URL without userinfo, query or fragment", opts.PublicURL)
	}
	s := &Service{opts: opts, publicURL: strings.TrimRight(opts.PublicURL, "/"), issuer: opts.Issuer, log: opts.Logger, now: opts.Now, st: newState()}
	if s.issuer == "" {
		s.issuer = s.publicURL
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&s.opts.MaxLifetime, DefaultMaxLifetime)
	def(&s.opts.EnrollmentTTL, DefaultEnrollmentTTL)
	def(&s.opts.ChallengeTTL, DefaultChallengeTTL)
	def(&s.opts.Retention, DefaultRetention)
	if s.opts.MaxBodyBytes <= 0 {
		s.opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	rpID := opts.RPID
	if rpID == "" {
		rpID = pu.Hostname()
	}
	origins := opts.RPOrigins
	if len(origins) == 0 {
		origins = []string{pu.Scheme + "://" + pu.Host}
	}
	name := opts.RPDisplayName
	if name == "" {
		name = DefaultRPDisplayName
	}
	if err := protocol.ValidateRPID(rpID); err != nil {
		return nil, fmt.Errorf("approver: relying-party id %q: %w (an IP address is not a valid RP ID: use a name such as localhost)", rpID, err)
	}
	s.wa, err = webauthn.New(&webauthn.Config{
		RPID:                  rpID,
		RPDisplayName:         name,
		RPOrigins:             origins,
		AttestationPreference: protocol.PreferNoAttestation,
		AuthenticatorSelection: protocol.AuthenticatorSelection{
			ResidentKey:        protocol.ResidentKeyRequirementPreferred,
			RequireResidentKey: protocol.ResidentKeyNotRequired(),
			UserVerification:   protocol.VerificationRequired,
		},
		Timeouts: webauthn.TimeoutsConfig{
			Login:        webauthn.TimeoutConfig{Timeout: s.opts.ChallengeTTL, TimeoutUVD: s.opts.ChallengeTTL},
			Registration: webauthn.TimeoutConfig{Timeout: s.opts.ChallengeTTL, TimeoutUVD: s.opts.ChallengeTTL},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("approver: WebAuthn configuration: %w", err)
	}
	for cred, org := range opts.Credentials {
		if len(cred) < minCredentialLength {
			return nil, fmt.Errorf("approver: a credential of org %q is shorter than %d characters", org, minCredentialLength)
		}
		if err := checkText("org id", org, 200); err != nil {
			return nil, fmt.Errorf("approver: credentials: %s", err.detail)
		}
		s.creds = append(s.creds, credEntry{HashCredential(cred), org})
	}
	for h, org := range opts.CredentialHashes {
		if slices.ContainsFunc(s.creds, func(c credEntry) bool { return c.hash == h }) {
			return nil, fmt.Errorf("approver: a credential of org %q is given twice", org)
		}
		if err := checkText("org id", org, 200); err != nil {
			return nil, fmt.Errorf("approver: credentials: %s", err.detail)
		}
		s.creds = append(s.creds, credEntry{h, org})
	}
	jwk := opts.SigningKey.PublicJWK()
	if s.jwks, err = json.Marshal(struct {
		Keys []any `json:"keys"`
	}{[]any{jwk}}); err != nil {
		return nil, fmt.Errorf("approver: JWKS: %w", err)
	}
	if opts.Store != nil {
		data, err := opts.Store.Load()
		if err != nil {
			return nil, fmt.Errorf("approver: loading state: %w", err)
		}
		if data != nil {
			if err := s.st.load(data); err != nil {
				return nil, err
			}
		}
	}
	s.routes()
	return s, nil
}

// Issuer is the iss of the receipts the service signs.
func (s *Service) Issuer() string { return s.issuer }

// KeyID is the kid of the receipt signing key.
func (s *Service) KeyID() string { return s.opts.SigningKey.KID() }

func (s *Service) routes() {
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/approval-requests", s.api(s.openRequest))
	m.HandleFunc("GET /v1/approval-requests/{request_id}", s.api(s.getRequest))
	m.HandleFunc("DELETE /v1/approval-requests/{request_id}", s.api(s.cancelRequest))
	m.HandleFunc("POST /v1/approval-requests/{request_id}/revoke", s.api(s.revokeRequest))
	m.HandleFunc("POST /v1/approvers", s.api(s.enrollApprover))
	m.HandleFunc("GET /.well-known/jwks.json", s.serveJWKS)
	m.HandleFunc("GET /enroll/{token}", s.enrollPage)
	m.HandleFunc("POST /enroll/{token}/begin", s.page(s.enrollBegin))
	m.HandleFunc("POST /enroll/{token}/finish", s.page(s.enrollFinish))
	m.HandleFunc("GET /approve/{token}", s.approvePage)
	m.HandleFunc("POST /approve/{token}/begin", s.page(s.approveBegin))
	m.HandleFunc("POST /approve/{token}/finish", s.page(s.approveFinish))
	m.HandleFunc("GET /assets/{name}", s.serveAsset)
	// Another method on a known path: a problem body rather than the
	// mux's plain-text 405.
	for path, allow := range map[string]string{
		"/v1/approval-requests":                     "POST",
		"/v1/approval-requests/{request_id}":        "GET, DELETE",
		"/v1/approval-requests/{request_id}/revoke": "POST",
		"/v1/approvers":                             "POST",
		"/.well-known/jwks.json":                    "GET, HEAD",
		"/enroll/{token}":                           "GET, HEAD",
		"/enroll/{token}/begin":                     "POST",
		"/enroll/{token}/finish":                    "POST",
		"/approve/{token}":                          "GET, HEAD",
		"/approve/{token}/begin":                    "POST",
		"/approve/{token}/finish":                   "POST",
		"/assets/{name}":                            "GET, HEAD",
	} {
		m.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeProblem(w, refuse(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s is not allowed here; use %s", r.Method, allow))
		})
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, refuse(http.StatusNotFound, CodeNotFound, "no such route"))
	})
	s.mux = m
}

// ServeHTTP serves the service's routes.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer") // the links carry their token in the path
	s.mux.ServeHTTP(w, r)
}

// apiHandler answers one route of Clearance's API for the credential's org
// and the request's body.
type apiHandler func(r *http.Request, org string, body []byte) (int, any, *problem)

// api authenticates the Bearer credential and renders the answer.
func (s *Service) api(h apiHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		org, ok := s.authenticate(r)
		if !ok {
			writeProblem(w, refuse(http.StatusUnauthorized, CodeUnauthorized, "a valid Bearer credential is required"))
			return
		}
		body, p := s.readBody(w, r)
		if p != nil {
			writeProblem(w, p)
			return
		}
		status, v, p := h(r, org, body)
		if p != nil {
			writeProblem(w, p)
			return
		}
		writeJSON(w, status, v)
	}
}

// authenticate returns the org of the request's Bearer credential. The
// presented credential's SHA-256 is compared with every stored hash in
// constant time; the loop does not stop at a match.
func (s *Service) authenticate(r *http.Request) (string, bool) {
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimSpace(cred)
	if cred == "" {
		return "", false
	}
	h := HashCredential(cred)
	org, found := "", 0
	for _, c := range s.creds {
		if subtle.ConstantTimeCompare(h[:], c.hash[:]) == 1 {
			org, found = c.org, found+1
		}
	}
	return org, found > 0
}

// pageHandler answers one of the pages' JSON calls for a link's token.
type pageHandler func(r *http.Request, token string, body []byte) (any, *problem)

// page reads a page call's JSON body and renders the answer.
func (s *Service) page(h pageHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "application/json") {
			writeProblem(w, refuse(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "send application/json"))
			return
		}
		body, p := s.readBody(w, r)
		if p != nil {
			writeProblem(w, p)
			return
		}
		v, p := h(r, r.PathValue("token"), body)
		if p != nil {
			writeProblem(w, p)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, refuse(http.StatusInternalServerError, CodeInternal, "encoding the answer failed"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// readBody reads the request body within the size limit.
func (s *Service) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *problem) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, refuse(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the body is larger than %d bytes", s.opts.MaxBodyBytes)
	}
	if err != nil {
		return nil, refuse(http.StatusBadRequest, strictjson.CodeMalformed, "reading the body failed")
	}
	return body, nil
}

// decode strictly decodes a JSON object body into v: duplicate or unknown
// members, invalid UTF-8 and trailing data are refused.
func decode(body []byte, v any) *problem {
	if err := strictjson.Decode(body, v, strictjson.Options{RejectUnknown: true, MaxMembers: 64, MaxElements: 64}); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return refuse(http.StatusBadRequest, se.Code, "%s", se.Detail)
		}
		return refuse(http.StatusBadRequest, strictjson.CodeMalformed, "the body is not valid JSON")
	}
	return nil
}

// decodeEmpty accepts an empty body or an empty JSON object.
func decodeEmpty(body []byte) *problem {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	var v struct{}
	return decode(body, &v)
}

// checkText refuses an empty or over-long value, or one with control
// characters.
func checkText(field, v string, max int) *problem {
	if v == "" {
		return refuse(http.StatusBadRequest, CodeMissingField, "%s is required", field)
	}
	return checkOptionalText(field, v, max)
}

func checkOptionalText(field, v string, max int) *problem {
	if utf8.RuneCountInString(v) > max {
		return refuse(http.StatusBadRequest, CodeInvalidField, "%s is longer than %d characters", field, max)
	}
	if !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 || strings.IndexFunc(v, isBidiControl) >= 0 {
		return refuse(http.StatusBadRequest, CodeInvalidField, "%s holds control characters", field)
	}
	if strings.TrimSpace(v) != v {
		return refuse(http.StatusBadRequest, CodeInvalidField, "%s has leading or trailing spaces", field)
	}
	return nil
}

// isBidiControl reports the characters that reorder text as it is
// displayed: on an approval page they could make a target or an amount
// read other than it is.
func isBidiControl(r rune) bool {
	return r == 0x061C || r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// randomToken is 32 random bytes in unpadded base64url: a link's locator.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID is prefix followed by 16 random bytes in lowercase base32.
func newID(prefix string) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + idEncoding.EncodeToString(b)
}

// internalError logs err and answers 500 without its detail.
func (s *Service) internalError(what string, err error) *problem {
	s.log.Error("approver: "+what, "error", err.Error())
	return refuse(http.StatusInternalServerError, CodeInternal, "%s failed", what)
}

// persistLocked saves the state; if that fails it calls undo, which puts
// the memory back as it was. s.mu must be held.
func (s *Service) persistLocked(undo func()) *problem {
	if s.opts.Store == nil {
		return nil
	}
	data, err := s.st.encode()
	if err == nil {
		err = s.opts.Store.Save(data)
	}
	if err != nil {
		undo()
		return s.internalError("saving the state", err)
	}
	return nil
}
