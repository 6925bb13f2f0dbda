package approval_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/approval/approvaltest"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/outbound"
)

func TestOpen(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	r := e.open(t, "esc-1", intentA)
	if r.Status != approval.StatusPending || r.OrgID != "org-1" || r.EscalationID != "esc-1" || r.IntentHash != intentA ||
		!r.ExpiresAt.Equal(t0.Add(time.Hour)) || !r.CreatedAt.Equal(t0) || r.ApprovalURL == "" || r.Receipt != "" || !r.DecidedAt.IsZero() {
		t.Fatalf("%+v", r)
	}
	t.Run("same body again: the same request", func(t *testing.T) {
		again := e.open(t, "esc-1", intentA)
		if again.RequestID != r.RequestID {
			t.Fatalf("replay opened %s, first %s", again.RequestID, r.RequestID)
		}
		// The same instant in another zone and with nanoseconds is the same body.
		o := openReq("esc-1", intentA)
		o.ExpiresAt = o.ExpiresAt.In(time.FixedZone("x", 3600)).Add(400 * time.Millisecond)
		if again, err := e.svc.Open(ctx, e.ep, o); err != nil || again.RequestID != r.RequestID {
			t.Fatalf("%v %v", again, err)
		}
	})
	t.Run("another body: conflict", func(t *testing.T) {
		_, err := e.svc.Open(ctx, e.ep, openReq("esc-1", intentB))
		wantErr(t, err, approval.ErrConflict)
		if codeOf(err) != approval.CodeConflict {
			t.Fatal(codeOf(err))
		}
	})
	t.Run("credential sent as Bearer, never to the JWKS", func(t *testing.T) {
		for _, c := range e.fake.Calls() {
			want := "Bearer " + cred1
			if c.Path == approval.PathJWKS {
				want = ""
			}
			if c.Authorization != want {
				t.Errorf("%s %s: Authorization %q", c.Method, c.Path, c.Authorization)
			}
		}
	})
	t.Run("invalid input sends nothing", func(t *testing.T) {
		before := len(e.fake.Calls())
		for name, mutate := range map[string]func(*approval.OpenRequest){
			"no org":            func(o *approval.OpenRequest) { o.OrgID = "" },
			"no escalation":     func(o *approval.OpenRequest) { o.EscalationID = "" },
			"bad intent hash":   func(o *approval.OpenRequest) { o.IntentHash = "sha256:ABC" },
			"upper hex":         func(o *approval.OpenRequest) { o.IntentHash = strings.ToUpper(intentA) },
			"no actor":          func(o *approval.OpenRequest) { o.Actor = approval.Actor{} },
			"no action type":    func(o *approval.OpenRequest) { o.Action.Type = "" },
			"amount exponent":   func(o *approval.OpenRequest) { o.Action.Amount = "1e3" },
			"amount negative":   func(o *approval.OpenRequest) { o.Action.Amount = "-5" },
			"amount leading 0":  func(o *approval.OpenRequest) { o.Action.Amount = "01.5" },
			"amount dot":        func(o *approval.OpenRequest) { o.Action.Amount = "1." },
			"control character": func(o *approval.OpenRequest) { o.Action.Target = "a\nb" },
			"too long":          func(o *approval.OpenRequest) { o.Actor.ID = strings.Repeat("x", approval.MaxTextLength+1) },
			"no expiry":         func(o *approval.OpenRequest) { o.ExpiresAt = time.Time{} },
		} {
			o := openReq("esc-x", intentA)
			mutate(&o)
			if _, err := e.svc.Open(ctx, e.ep, o); !errors.Is(err, approval.ErrInvalidRequest) {
				t.Errorf("%s: %v", name, err)
			}
		}
		if len(e.fake.Calls()) != before {
			t.Fatal("an invalid request was sent")
		}
	})
	t.Run("amounts", func(t *testing.T) {
		for i, a := range []string{"", "0", "0.5", "1250.00", "1000000"} {
			o := openReq(fmt.Sprintf("esc-amount-%d", i), intentA)
			o.Action.Amount = a
			if _, err := e.svc.Open(ctx, e.ep, o); err != nil {
				t.Errorf("amount %q: %v", a, err)
			}
		}
	})
	t.Run("another org's credential", func(t *testing.T) {
		ep := e.ep
		ep.Credential = cred2 // bound to org-2 at the service
		_, err := e.svc.Open(ctx, ep, openReq("esc-2", intentA))
		wantErr(t, err, approval.ErrUnavailable) // 403: a configuration fault
	})
	t.Run("an answer for another escalation", func(t *testing.T) {
		other := e.open(t, "esc-3", intentA)
		e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPost {
				return false
			}
			rec, _ := e.fake.Get(other.RequestID)
			approvaltest.WriteJSON(w, http.StatusOK, approvaltest.Answer(&rec))
			return true
		})
		defer e.fake.SetFault(nil)
		_, err := e.svc.Open(ctx, e.ep, openReq("esc-4", intentA))
		wantErr(t, err, approval.ErrEvidenceInvalid)
	})
	t.Run("400 from the service", func(t *testing.T) {
		e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
			approvaltest.Problem(w, http.StatusUnprocessableEntity, "EXPIRES_AT_TOO_FAR", "expires_at is more than 24 h away")
			return true
		})
		defer e.fake.SetFault(nil)
		_, err := e.svc.Open(ctx, e.ep, openReq("esc-5", intentA))
		wantErr(t, err, approval.ErrRejected)
		if !strings.Contains(err.Error(), "EXPIRES_AT_TOO_FAR") || !strings.Contains(err.Error(), "24 h") {
			t.Fatalf("the service's code and detail are lost: %v", err)
		}
	})
}

func TestGetAndCancel(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	a := e.open(t, "esc-a", intentA)
	b := e.open(t, "esc-b", intentA)

	got, err := e.svc.Get(ctx, e.ep, a.RequestID)
	if err != nil || got.RequestID != a.RequestID || got.Status != approval.StatusPending {
		t.Fatalf("%v %v", got, err)
	}
	if got, err = e.svc.Cancel(ctx, e.ep, a.RequestID); err != nil || got.Status != approval.StatusCancelled {
		t.Fatalf("cancel a pending request: %v %v", got, err)
	}
	if got, err = e.svc.Cancel(ctx, e.ep, a.RequestID); err != nil || got.Status != approval.StatusCancelled {
		t.Fatalf("cancel again: %v %v", got, err)
	}
	e.clock.Add(time.Second)
	e.fake.Approve(b.RequestID, "alice")
	if got, err = e.svc.Cancel(ctx, e.ep, b.RequestID); err != nil || got.Status != approval.StatusApproved ||
		got.Approver != "alice" || got.Receipt == "" || !got.DecidedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("a decided request is returned as it stands: %v %v", got, err)
	}

	t.Run("unknown and another org's", func(t *testing.T) {
		_, err := e.svc.Get(ctx, e.ep, "apr_9999")
		wantErr(t, err, approval.ErrNotFound)
		ep2 := e.ep
		ep2.Credential = cred2
		_, err = e.svc.Get(ctx, ep2, a.RequestID)
		wantErr(t, err, approval.ErrNotFound)
		_, err = e.svc.Cancel(ctx, ep2, b.RequestID)
		wantErr(t, err, approval.ErrNotFound)
	})
	t.Run("malformed ids are not sent", func(t *testing.T) {
		before := len(e.fake.Calls())
		for _, id := range []string{"", ".", "..", "../jwks", "a/b", "a b", "a?b", "a#b", "%2e", "-a", strings.Repeat("a", approval.MaxIDLength+1)} {
			if _, err := e.svc.Get(ctx, e.ep, id); !errors.Is(err, approval.ErrInvalidRequest) {
				t.Errorf("Get(%q): %v", id, err)
			}
			if _, err := e.svc.Cancel(ctx, e.ep, id); !errors.Is(err, approval.ErrInvalidRequest) {
				t.Errorf("Cancel(%q): %v", id, err)
			}
		}
		if len(e.fake.Calls()) != before {
			t.Fatal("a malformed id was sent")
		}
	})
	t.Run("expired", func(t *testing.T) {
		c := e.open(t, "esc-c", intentA)
		e.clock.Add(2 * time.Hour)
		got, err := e.svc.Get(ctx, e.ep, c.RequestID)
		if err != nil || got.Status != approval.StatusExpired {
			t.Fatalf("%v %v", got, err)
		}
	})
}

func TestRequestFormatHidesApprovalURL(t *testing.T) {
	e := setup(t)
	r := e.open(t, "esc-1", intentA)
	if !strings.Contains(r.ApprovalURL, "secret-invitation") {
		t.Fatalf("the fake's approval URL changed: %q", r.ApprovalURL)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		s := fmt.Sprintf(verb, r)
		if strings.Contains(s, "secret-invitation") || !strings.Contains(s, r.RequestID) {
			t.Errorf("%s: %s", verb, s)
		}
	}
	if s := fmt.Sprintf("%v", approval.Verified{Request: r}); strings.Contains(s, "secret-invitation") {
		t.Errorf("Verified: %s", s)
	}
}

// rewrite makes the fake answer GETs of id with its record changed by f.
func (e *env) rewrite(id string, f func(a map[string]any)) {
	e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || r.URL.Path != approval.PathRequests+"/"+id {
			return false
		}
		rec, _ := e.fake.Get(id)
		a := approvaltest.Answer(&rec)
		f(a)
		approvaltest.WriteJSON(w, http.StatusOK, a)
		return true
	})
}

// raw makes the fake answer GETs of approval requests with status, content
// type and body.
func (e *env) raw(status int, contentType, body string) {
	e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == approval.PathJWKS {
			return false
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		io.WriteString(w, body)
		return true
	})
}

// setReceipt makes the request's record APPROVED (or status) with a
// receipt signed by signer for rc.
func (e *env) setReceipt(t *testing.T, id, status string, signer grant.Signer, rc grant.ApprovalReceipt) {
	t.Helper()
	jws, err := grant.SignApprovalReceipt(signer, rc)
	if err != nil {
		t.Fatal(err)
	}
	e.fake.Update(id, func(r *approvaltest.Record) {
		r.Status, r.Receipt, r.Approver, r.DecidedAt = status, jws, rc.Approver, time.Unix(rc.IssuedAt, 0)
	})
}

// approvedReceipt is the receipt the fake would sign for approving id now.
func (e *env) approvedReceipt(id string) grant.ApprovalReceipt {
	rec, _ := e.fake.Get(id)
	rec.Approver, rec.DecidedAt = "alice", e.clock.Now()
	return e.fake.ReceiptFor(rec, grant.ApprovalApproved)
}

func TestVerify(t *testing.T) {
	otherKey := seedKey(t, 'o')
	type scenario struct {
		name string
		// arrange prepares request id (open for org-1, intentA, PENDING)
		// and may change the endpoint or the binding.
		arrange  func(t *testing.T, e *env, id string, ep *approval.Endpoint, want *approval.Binding)
		err      error           // nil: Verified
		also     error           // another error the result must wrap
		status   approval.Status // the Verified status, or the *Error's
		approved bool
	}
	tests := []scenario{
		{name: "pending", status: approval.StatusPending},
		{name: "approved", approved: true, status: approval.StatusApproved,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
			}},
		{name: "denied", err: approval.ErrNotApproved, status: approval.StatusDenied,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Deny(id, "alice")
			}},
		{name: "expired", err: approval.ErrNotApproved, status: approval.StatusExpired,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.clock.Add(time.Hour)
			}},
		{name: "cancelled", err: approval.ErrNotApproved, status: approval.StatusCancelled,
			arrange: func(t *testing.T, e *env, id string, ep *approval.Endpoint, _ *approval.Binding) {
				if _, err := e.svc.Cancel(context.Background(), *ep, id); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "revoked", err: approval.ErrNotApproved, status: approval.StatusRevoked,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				e.fake.Revoke(id)
			}},

		// contradictions
		{name: "forged receipt, another key", err: approval.ErrEvidenceInvalid, also: grant.ErrUnknownKey,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.setReceipt(t, id, approvaltest.Approved, otherKey, e.approvedReceipt(id))
			}},
		{name: "forged receipt, the service's kid", err: approval.ErrEvidenceInvalid, also: grant.ErrTokenSignature,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.setReceipt(t, id, approvaltest.Approved, otherKid{e.key.KID(), otherKey}, e.approvedReceipt(id))
			}},
		{name: "receipt for another intent", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				rc := e.approvedReceipt(id)
				rc.IntentHash = intentB
				e.setReceipt(t, id, approvaltest.Approved, e.key, rc)
			}},
		{name: "receipt for another org", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				rc := e.approvedReceipt(id)
				rc.OrgID = "org-2"
				e.setReceipt(t, id, approvaltest.Approved, e.key, rc)
			}},
		{name: "receipt of another request", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				other := e.open(t, "esc-other", intentA)
				receipt := e.fake.Approve(other.RequestID, "alice")
				e.fake.Update(id, func(r *approvaltest.Record) {
					r.Status, r.Receipt, r.Approver, r.DecidedAt = approvaltest.Approved, receipt, "alice", e.clock.Now()
				})
			}},
		{name: "DENIED receipt with APPROVED status", err: approval.ErrEvidenceInvalid, status: approval.StatusApproved,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Deny(id, "alice")
				e.fake.Update(id, func(r *approvaltest.Record) { r.Status = approvaltest.Approved })
			}},
		{name: "APPROVED without a receipt", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Update(id, func(r *approvaltest.Record) {
					r.Status, r.Approver, r.DecidedAt = approvaltest.Approved, "alice", e.clock.Now()
				})
			}},
		{name: "PENDING with a receipt", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.setReceipt(t, id, approvaltest.Pending, e.key, e.approvedReceipt(id))
			}},
		{name: "receipt that is not a JWS", err: approval.ErrEvidenceInvalid, also: grant.ErrTokenMalformed,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				e.fake.Update(id, func(r *approvaltest.Record) { r.Receipt = "not.a.jws" })
			}},
		{name: "receipt of another issuer", err: approval.ErrEvidenceInvalid, also: grant.ErrTokenIssuer,
			arrange: func(t *testing.T, e *env, id string, ep *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				ep.Issuer = "https://approver.example"
			}},
		{name: "receipt of another approver", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				e.fake.Update(id, func(r *approvaltest.Record) { r.Approver = "mallory" })
			}},
		{name: "receipt issued after the expiry", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				rc := e.approvedReceipt(id)
				rc.IssuedAt = t0.Add(time.Hour + time.Second).Unix()
				e.setReceipt(t, id, approvaltest.Approved, e.key, rc)
			}},
		{name: "receipt issued before the request", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				rc := e.approvedReceipt(id)
				rc.IssuedAt = t0.Add(-time.Second).Unix()
				e.setReceipt(t, id, approvaltest.Approved, e.key, rc)
			}},
		{name: "answer for another org", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				e.rewrite(id, func(a map[string]any) { a["org_id"] = "org-2" })
			}},
		{name: "answer for another intent", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, want *approval.Binding) {
				e.fake.Approve(id, "alice")
				want.IntentHash = intentB
			}},
		{name: "binding of another org", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, want *approval.Binding) {
				e.fake.Approve(id, "alice")
				want.OrgID = "org-2"
			}},
		{name: "answer for another request id", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				e.rewrite(id, func(a map[string]any) { a["request_id"] = "apr_0042" })
			}},
		{name: "unknown request", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.rewrite(id, func(map[string]any) {})
				e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
					approvaltest.Problem(w, http.StatusNotFound, "APPROVAL_REQUEST_NOT_FOUND", "no such request")
					return true
				})
			}},
		{name: "another org's request", err: approval.ErrEvidenceInvalid,
			arrange: func(t *testing.T, e *env, id string, ep *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				ep.Credential = cred2
			}},

		// no usable answer
		{name: "service down", err: approval.ErrUnavailable, also: outbound.ErrUnreachable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				e.fake.Close()
			}},
		{name: "500", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.raw(500, "application/problem+json", `{"status":500,"code":"INTERNAL"}`)
			}},
		{name: "503 HTML", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.raw(503, "text/html", `<h1>maintenance</h1>`)
			}},
		{name: "429", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.raw(429, "application/problem+json", `{"status":429,"code":"RATE_LIMITED"}`)
			}},
		{name: "400", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.raw(400, "application/problem+json", `{"status":400,"code":"BAD"}`)
			}},
		{name: "credential refused", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, ep *approval.Endpoint, _ *approval.Binding) {
				ep.Credential = "cred-revoked"
			}},
		{name: "204", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.raw(204, "application/json", "")
			}},
		{name: "redirect", err: approval.ErrUnavailable, also: outbound.ErrRedirect,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					t.Error("the redirect was followed")
				}))
				t.Cleanup(target.Close)
				e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
					http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
					return true
				})
			}},
		{name: "oversize answer", err: approval.ErrUnavailable, also: outbound.ErrResponseTooLarge,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				e.rewrite(id, func(a map[string]any) { a["padding"] = strings.Repeat("x", outbound.DefaultMaxResponseBytes) })
			}},
		{name: "not JSON", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.raw(200, "application/json", `approved!`)
			}},
		{name: "JSON, wrong content type", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
					if r.URL.Path == approval.PathJWKS {
						return false
					}
					w.Header().Set("Content-Type", "text/plain")
					w.WriteHeader(200)
					fmt.Fprintf(w, `{"request_id":%q,"org_id":"org-1","escalation_id":"esc","intent_hash":%q,"status":"PENDING","expires_at":"2026-03-01T13:00:00Z","created_at":"2026-03-01T12:00:00Z"}`, id, intentA)
					return true
				})
			}},
		{name: "duplicate member", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.raw(200, "application/json", fmt.Sprintf(`{"request_id":%q,"org_id":"org-1","escalation_id":"esc","intent_hash":%q,"status":"DENIED","status":"APPROVED","expires_at":"2026-03-01T13:00:00Z","created_at":"2026-03-01T12:00:00Z"}`, id, intentA))
			}},
		{name: "missing created_at", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.rewrite(id, func(a map[string]any) { delete(a, "created_at") })
			}},
		{name: "unknown status", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.rewrite(id, func(a map[string]any) { a["status"] = "approved" })
			}},
		{name: "status of the wrong type", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.rewrite(id, func(a map[string]any) { a["status"] = true })
			}},
		{name: "bad time", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.rewrite(id, func(a map[string]any) { a["expires_at"] = "tomorrow" })
			}},
		{name: "bad intent hash", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.rewrite(id, func(a map[string]any) { a["intent_hash"] = "sha256:xyz" })
			}},
		{name: "unknown members are tolerated", status: approval.StatusApproved, approved: true,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				e.rewrite(id, func(a map[string]any) { a["policy"] = map[string]any{"quorum": 1}; a["Status"] = "DENIED" })
			}},
		{name: "key set down", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
					if r.URL.Path != approval.PathJWKS {
						return false
					}
					w.WriteHeader(502)
					return true
				})
			}},
		{name: "key set with private material", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				jwk := e.key.PublicJWK()
				e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
					if r.URL.Path != approval.PathJWKS {
						return false
					}
					approvaltest.WriteJSON(w, 200, map[string]any{"keys": []any{map[string]any{
						"kty": "OKP", "crv": "Ed25519", "kid": jwk.KeyID, "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
						"d": "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"}}})
					return true
				})
			}},
		{name: "key set garbage", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
					if r.URL.Path != approval.PathJWKS {
						return false
					}
					approvaltest.WriteJSON(w, 200, map[string]any{"keys": "none"})
					return true
				})
			}},
		{name: "key set without Ed25519 keys", err: approval.ErrUnavailable,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
					if r.URL.Path != approval.PathJWKS {
						return false
					}
					approvaltest.WriteJSON(w, 200, map[string]any{"keys": []any{map[string]any{"kty": "EC", "crv": "P-256", "kid": "x"}}})
					return true
				})
			}},
		{name: "key set with extra keys of other types", status: approval.StatusApproved, approved: true,
			arrange: func(t *testing.T, e *env, id string, _ *approval.Endpoint, _ *approval.Binding) {
				e.fake.Approve(id, "alice")
				e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
					if r.URL.Path != approval.PathJWKS {
						return false
					}
					approvaltest.WriteJSON(w, 200, map[string]any{"keys": []any{
						map[string]any{"kty": "EC", "crv": "P-256", "kid": "x"}, e.key.PublicJWK()}})
					return true
				})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t)
			id := e.open(t, "esc-1", intentA).RequestID
			ep, want := e.ep, approval.Binding{OrgID: "org-1", IntentHash: intentA}
			if tt.arrange != nil {
				tt.arrange(t, e, id, &ep, &want)
			}
			v, err := approval.Verify(context.Background(), e.svc, ep, id, want)
			t.Log(err)
			if strings.Contains(fmt.Sprint(err), ep.Credential) || strings.Contains(fmt.Sprint(err), cred1) {
				t.Fatalf("the error shows the credential: %v", err)
			}
			if tt.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				if v.Status != tt.status || v.Approved() != tt.approved || v.Request.RequestID != id {
					t.Fatalf("%+v", v)
				}
				if tt.approved {
					rec, _ := e.fake.Get(id)
					if v.ReceiptJWS != rec.Receipt || v.Receipt.RequestID != id || v.Receipt.OrgID != "org-1" ||
						v.Receipt.IntentHash != intentA || v.Receipt.Approver != "alice" || v.KeyID != e.key.KID() {
						t.Fatalf("%+v", v)
					}
				} else if v.ReceiptJWS != "" || v.Receipt != (grant.ApprovalReceipt{}) {
					t.Fatalf("a pending result with a receipt: %+v", v)
				}
				return
			}
			wantErr(t, err, tt.err)
			if tt.also != nil {
				wantErr(t, err, tt.also)
			}
			if v != (approval.Verified{}) || v.Approved() {
				t.Fatalf("an error with a result: %+v", v)
			}
			var ae *approval.Error
			if !errors.As(err, &ae) || ae.Code() == "" {
				t.Fatalf("not an *approval.Error with a code: %T %v", err, err)
			}
			// Each error wraps exactly one of the package's sentinels.
			n := 0
			for _, s := range []error{approval.ErrNotConfigured, approval.ErrInvalidEndpoint, approval.ErrInvalidRequest,
				approval.ErrUnavailable, approval.ErrRejected, approval.ErrNotFound, approval.ErrConflict,
				approval.ErrEvidenceInvalid, approval.ErrNotApproved} {
				if errors.Is(err, s) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%v wraps %d sentinels", err, n)
			}
			if tt.err == approval.ErrNotApproved || tt.status != "" {
				if ae.Status != tt.status {
					t.Fatalf("status %q, want %q", ae.Status, tt.status)
				}
			}
		})
	}
}

func TestVerifyPresented(t *testing.T) {
	ctx := context.Background()
	want := approval.Binding{OrgID: "org-1", IntentHash: intentA}
	t.Run("the service's receipt", func(t *testing.T) {
		e := setup(t)
		id := e.open(t, "esc-1", intentA).RequestID
		receipt := e.fake.Approve(id, "alice")
		v, err := approval.VerifyPresented(ctx, e.svc, e.ep, approval.Evidence{RequestID: id, Receipt: receipt}, want)
		if err != nil || !v.Approved() || v.ReceiptJWS != receipt {
			t.Fatalf("%+v %v", v, err)
		}
	})
	for _, tt := range []struct {
		name    string
		present func(t *testing.T, e *env, id string) approval.Evidence
		err     error
	}{
		{"no receipt", func(t *testing.T, e *env, id string) approval.Evidence {
			e.fake.Approve(id, "alice")
			return approval.Evidence{RequestID: id}
		}, approval.ErrEvidenceInvalid},
		{"a valid receipt that is not the service's", func(t *testing.T, e *env, id string) approval.Evidence {
			e.fake.Approve(id, "alice")
			rc := e.approvedReceipt(id)
			rc.ID = "rcpt-minted-elsewhere"
			return approval.Evidence{RequestID: id, Receipt: e.fake.Sign(rc)}
		}, approval.ErrEvidenceInvalid},
		{"the receipt of another request", func(t *testing.T, e *env, id string) approval.Evidence {
			e.fake.Approve(id, "alice")
			other := e.open(t, "esc-2", intentA).RequestID
			return approval.Evidence{RequestID: id, Receipt: e.fake.Approve(other, "alice")}
		}, approval.ErrEvidenceInvalid},
		{"the receipt with another request id", func(t *testing.T, e *env, id string) approval.Evidence {
			other := e.open(t, "esc-2", intentA).RequestID
			return approval.Evidence{RequestID: other, Receipt: e.fake.Approve(id, "alice")}
		}, approval.ErrEvidenceInvalid},
		{"a receipt for a pending request", func(t *testing.T, e *env, id string) approval.Evidence {
			return approval.Evidence{RequestID: id, Receipt: e.fake.Sign(e.approvedReceipt(id))}
		}, approval.ErrEvidenceInvalid},
		{"a receipt for a denied request", func(t *testing.T, e *env, id string) approval.Evidence {
			return approval.Evidence{RequestID: id, Receipt: e.fake.Deny(id, "alice")}
		}, approval.ErrNotApproved},
		{"an approved receipt, since revoked", func(t *testing.T, e *env, id string) approval.Evidence {
			receipt := e.fake.Approve(id, "alice")
			e.fake.Revoke(id)
			return approval.Evidence{RequestID: id, Receipt: receipt}
		}, approval.ErrNotApproved},
		{"an oversize receipt", func(t *testing.T, e *env, id string) approval.Evidence {
			return approval.Evidence{RequestID: id, Receipt: e.fake.Approve(id, "alice") + strings.Repeat("A", approval.MaxReceiptLength)}
		}, approval.ErrEvidenceInvalid},
		{"a malformed request id", func(t *testing.T, e *env, id string) approval.Evidence {
			return approval.Evidence{RequestID: "../" + id, Receipt: e.fake.Approve(id, "alice")}
		}, approval.ErrInvalidRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t)
			id := e.open(t, "esc-1", intentA).RequestID
			ev := tt.present(t, e, id)
			v, err := approval.VerifyPresented(ctx, e.svc, e.ep, ev, want)
			wantErr(t, err, tt.err)
			if v.Approved() {
				t.Fatal("an error with an approval")
			}
		})
	}
}

func TestKeyRotation(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	want := approval.Binding{OrgID: "org-1", IntentHash: intentA}
	jwks := func() int { return e.fake.Count(http.MethodGet, approval.PathJWKS) }
	approve := func(esc string) string {
		id := e.open(t, esc, intentA).RequestID
		e.fake.Approve(id, "alice")
		return id
	}
	verify := func(id string) error {
		_, err := approval.Verify(ctx, e.svc, e.ep, id, want)
		return err
	}

	first := approve("esc-1")
	if err := verify(first); err != nil {
		t.Fatal(err)
	}
	if err := verify(first); err != nil || jwks() != 1 {
		t.Fatalf("%v; %d key set fetches, want 1 (cached)", err, jwks())
	}

	// The service rotates: a new key signs, both are published.
	next := seedKey(t, 'n')
	e.fake.SetSigner(next)
	e.fake.Publish(e.key, next)
	second := approve("esc-2")
	// Within the refetch interval an unknown kid is "try again", not invalid.
	err := verify(second)
	wantErr(t, err, approval.ErrUnavailable)
	if jwks() != 1 {
		t.Fatalf("%d fetches: an unknown kid within the interval fetched again", jwks())
	}
	e.clock.Add(approval.DefaultKeyRefetchInterval)
	if err := verify(second); err != nil {
		t.Fatal(err)
	}
	if err := verify(first); err != nil || jwks() != 2 {
		t.Fatalf("%v; %d fetches, want 2", err, jwks())
	}

	// A made-up kid: one fetch after the interval, then invalid; a second
	// made-up kid at once is throttled.
	forged := e.open(t, "esc-3", intentA).RequestID
	e.setReceipt(t, forged, approvaltest.Approved, seedKey(t, 'f'), e.approvedReceipt(forged))
	e.clock.Add(approval.DefaultKeyRefetchInterval)
	err = verify(forged)
	wantErr(t, err, approval.ErrEvidenceInvalid)
	wantErr(t, err, grant.ErrUnknownKey)
	if jwks() != 3 {
		t.Fatalf("%d fetches, want 3", jwks())
	}
	for range 5 {
		wantErr(t, verify(forged), approval.ErrUnavailable)
	}
	if jwks() != 3 {
		t.Fatalf("%d fetches: made-up kids are not bounded", jwks())
	}

	// The old key is withdrawn: once the cache expires, its receipts fail.
	e.fake.Publish(next)
	if err := verify(first); err != nil {
		t.Fatalf("within the TTL the cached key still serves: %v", err)
	}
	e.clock.Add(approval.DefaultKeyTTL)
	err = verify(first)
	wantErr(t, err, approval.ErrEvidenceInvalid)
	wantErr(t, err, grant.ErrUnknownKey)
	if err := verify(second); err != nil || jwks() != 4 {
		t.Fatalf("%v; %d fetches, want 4", err, jwks())
	}
}

func TestPublicKey(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	pub, err := e.svc.PublicKey(ctx, e.ep, e.key.KID())
	if err != nil || !pub.Equal(e.key.Public()) {
		t.Fatalf("%x %v", pub, err)
	}
	pub[0] ^= 0xff // the caller's copy
	if again, err := e.svc.PublicKey(ctx, e.ep, e.key.KID()); err != nil || !again.Equal(e.key.Public()) {
		t.Fatal("the cache handed out its own slice")
	}
	t.Run("key sets are per base URL", func(t *testing.T) {
		other := approvaltest.New(t, approvaltest.Options{Key: seedKey(t, 'z'), Now: e.clock.Now})
		ep := approval.Endpoint{BaseURL: other.URL + "/", Credential: cred1, Issuer: other.Issuer()}
		if _, err := e.svc.PublicKey(ctx, ep, e.key.KID()); !errors.Is(err, grant.ErrUnknownKey) {
			t.Fatalf("another service's set answered: %v", err)
		}
	})
	t.Run("a cancelled wait", func(t *testing.T) {
		e := setup(t)
		entered, release := make(chan struct{}), make(chan struct{})
		e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
			close(entered)
			<-release
			return false
		})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-entered
			cancel()
		}()
		_, err := e.svc.PublicKey(ctx, e.ep, e.key.KID())
		wantErr(t, err, approval.ErrUnavailable)
		wantErr(t, err, context.Canceled)
		// The fetch it started completes for the next caller.
		e.fake.SetFault(nil)
		close(release)
		if _, err := e.svc.PublicKey(context.Background(), e.ep, e.key.KID()); err != nil {
			t.Fatal(err)
		}
		if n := e.fake.Count(http.MethodGet, approval.PathJWKS); n != 1 {
			t.Fatalf("%d fetches, want 1: the abandoned fetch was not shared", n)
		}
	})
}

func TestConcurrentVerify(t *testing.T) {
	e := setup(t)
	want := approval.Binding{OrgID: "org-1", IntentHash: intentA}
	var ids []string
	for i := range 8 {
		id := e.open(t, fmt.Sprintf("esc-%d", i), intentA).RequestID
		if i%2 == 0 {
			e.fake.Approve(id, "alice")
		}
		ids = append(ids, id)
	}
	// The key set answers only once every verifier may be waiting for it.
	release := make(chan struct{})
	e.fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == approval.PathJWKS {
			<-release
		}
		return false
	})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			id := ids[i%len(ids)]
			v, err := approval.Verify(context.Background(), e.svc, e.ep, id, want)
			switch {
			case err != nil:
				errs <- fmt.Errorf("%s: %w", id, err)
			case v.Approved() != (i%len(ids)%2 == 0):
				errs <- fmt.Errorf("%s: approved %v", id, v.Approved())
			}
		})
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := e.fake.Count(http.MethodGet, approval.PathJWKS); n != 1 {
		t.Fatalf("%d key set fetches, want 1 shared by every verifier", n)
	}
}
