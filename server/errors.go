package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
)

// Codes the HTTP layer itself reports.
const (
	codeBodyTooLarge     = "BODY_TOO_LARGE"
	codeUnsupportedMedia = "UNSUPPORTED_MEDIA_TYPE"
	codeRateLimited      = "RATE_LIMITED"
	codeInternal         = "INTERNAL_ERROR"
	codeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	codeRouteNotFound    = "ROUTE_NOT_FOUND"

	codeBodyUnreadable     = "BODY_UNREADABLE"           // the body could not be read off the connection
	codeInvalidQuery       = "INVALID_QUERY"             // a malformed or unsupported query string
	codeHeaderBodyMismatch = core.CodeHeaderBodyMismatch // a header and its body member disagree
	codePathBodyMismatch   = core.CodePathBodyMismatch   // a path segment and its body member disagree
	codeMissingField       = core.CodeMissingField       // a field the route requires is absent
	codeCSRFHeaderRequired = "CSRF_HEADER_REQUIRED"      // a signed-in change without HeaderCSRF
)

// Statuses of the automation connector's answers that are not problems:
// its HTML pages and its token endpoint's OAuth errors (RFC 6749 §5.2).
const (
	statusPageRefused = http.StatusBadRequest // an authorization request or form that cannot go on
	statusPageForged  = http.StatusForbidden  // a consent form not of this signed-in session
	statusOAuthError  = http.StatusBadRequest // every token error RFC 6749 names
)

// problem is an RFC 9457 body with Clearance's members.
type problem struct {
	Type      string                 `json:"type"`
	Title     string                 `json:"title"`
	Status    int                    `json:"status"`
	Detail    string                 `json:"detail"`
	Code      string                 `json:"code"`
	RequestID string                 `json:"request_id"`
	Errors    []clearance.FieldError `json:"errors,omitempty"`
}

// statusOf is the ONE table from error kinds to HTTP statuses.
func statusOf(err error) int {
	switch {
	case errors.Is(err, clearance.ErrInvalidRequest):
		return http.StatusBadRequest
	case errors.Is(err, clearance.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, clearance.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, clearance.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, clearance.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, clearance.ErrUnprocessable):
		return http.StatusUnprocessableEntity
	case errors.Is(err, clearance.ErrTooManyRequests):
		return http.StatusTooManyRequests
	case errors.Is(err, clearance.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errMediaType):
		return http.StatusUnsupportedMediaType
	case errors.Is(err, errRateLimited):
		return http.StatusTooManyRequests
	case errors.Is(err, errMethod):
		return http.StatusMethodNotAllowed
	case errors.Is(err, errNoRoute):
		return http.StatusNotFound
	}
	var se *strictjson.Error
	if errors.As(err, &se) {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

var (
	errTooLarge  = errors.New("request body too large")
	errMediaType = errors.New("unsupported media type")
	// errFormMediaType: a form route's body that is not form-encoded.
	errFormMediaType = fmt.Errorf("%w: form expected", errMediaType)
	errRateLimited   = errors.New("rate limited")
	errMethod        = errors.New("method not allowed")
	errNoRoute       = errors.New("no such route")
)

// problemOf renders any error as a problem body.
func problemOf(err error, requestID string) problem {
	status := statusOf(err)
	p := problem{Type: "about:blank", Title: http.StatusText(status), Status: status, RequestID: requestID}
	var ce *clearance.Error
	var se *strictjson.Error
	switch {
	case errors.As(err, &ce):
		p.Code, p.Detail, p.Errors = ce.Code, ce.Detail, ce.Fields
	case errors.As(err, &se):
		p.Code, p.Detail = se.Code, se.Detail
		if se.Field != "" {
			p.Errors = []clearance.FieldError{{Field: se.Field, Message: se.Detail}}
		}
	case errors.Is(err, errTooLarge):
		p.Code, p.Detail = codeBodyTooLarge, err.Error()
	case errors.Is(err, errFormMediaType):
		p.Code, p.Detail = codeUnsupportedMedia, "send Content-Type: application/x-www-form-urlencoded"
	case errors.Is(err, errMediaType):
		p.Code, p.Detail = codeUnsupportedMedia, "send Content-Type: application/json"
	case errors.Is(err, errRateLimited):
		p.Code, p.Detail = codeRateLimited, "too many requests for this credential; retry after the Retry-After delay"
	case errors.Is(err, errMethod):
		p.Code, p.Detail = codeMethodNotAllowed, "method not allowed on this route"
	case errors.Is(err, errNoRoute):
		p.Code, p.Detail = codeRouteNotFound, "no such route"
	default:
		p.Code, p.Detail = codeInternal, "internal error"
	}
	return p
}

// refusalBody names what a route answers a refusal with: a problem, or a
// fail-closed body of its own that a client acting on the answer cannot
// read as permission (a route attribute: route.refusal).
type refusalBody int

const (
	problemBody refusalBody = iota
	// claimRefusal: a 409 or 503 of a claim is failedClaim
	// (should_execute false, no attestation); other statuses a problem.
	claimRefusal
	// finalizeRefusal: a finalization recorded as INDETERMINATE answers its
	// result (409); anything else a problem.
	finalizeRefusal
	// checkoutRefusal: a checkout the policy refused answers its recorded,
	// non-authoritative answer (403); anything else a problem.
	checkoutRefusal
)

// writeRefusal writes err as the route's refusal body and returns the
// status, chosen here by statusOf like every other.
func writeRefusal(c *call, kind refusalBody, err error) int {
	status := statusOf(err)
	switch kind {
	case claimRefusal:
		if status == http.StatusConflict || status == http.StatusServiceUnavailable {
			p := problemOf(err, c.requestID)
			_ = c.writeJSON(status, failedClaim{Code: p.Code, Detail: p.Detail, RequestID: c.requestID})
			return status
		}
	case finalizeRefusal:
		var refused *clearance.FinalizeRefused
		if errors.As(err, &refused) {
			_ = c.writeJSON(status, refused.Result)
			return status
		}
	case checkoutRefusal:
		var refused *clearance.CheckoutRefused
		if errors.As(err, &refused) {
			_ = c.writeJSON(status, refused.Answer)
			return status
		}
	}
	return writeProblem(c.w, err, c.requestID)
}

// serverError reports whether status is the server's failure (5xx): an
// error span, a warn line.
func serverError(status int) bool { return status >= http.StatusInternalServerError }

// healthStatus is the status of a health answer: 503 when degraded, so a
// load balancer takes the server out.
func healthStatus(h clearance.Health) int {
	if h.Status != "ok" {
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}

// retryAfter is the Retry-After of a refusal that resolves by itself ("" for
// none): an entry not yet sealed is in a checkpoint within a seal interval.
func retryAfter(err error) string {
	var ce *clearance.Error
	switch {
	case errors.As(err, &ce) && ce.RetryAfter > 0:
		return strconv.Itoa(int((ce.RetryAfter + time.Second - 1) / time.Second)) // whole seconds, rounded up
	case errors.As(err, &ce) && ce.Code == clearance.CodeEntryNotYetSealed:
		return strconv.Itoa(int(clearance.DefaultSealInterval / time.Second))
	}
	return ""
}

func writeProblem(w http.ResponseWriter, err error, requestID string) int {
	p := problemOf(err, requestID)
	if ra := retryAfter(err); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(p)
	return p.Status
}
