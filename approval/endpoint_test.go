package approval_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/approval/approvaltest"
	"github.com/clearancehq/clearance/internal/outbound"
)

const secretCred = "clr_approver_0123456789abcdef-SECRET"

func TestEndpointNeverPrintsTheCredential(t *testing.T) {
	ep := approval.Endpoint{BaseURL: "https://approvals.example.com", Credential: secretCred, Issuer: "https://approvals.example.com"}
	type holder struct {
		EP approval.Endpoint
		P  *approval.Endpoint
	}
	values := []any{ep, &ep, holder{EP: ep, P: &ep}, []approval.Endpoint{ep},
		approval.Static{Default: ep, Orgs: map[string]approval.Endpoint{"org-1": ep}}}
	for _, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%T"} {
			if s := fmt.Sprintf(verb, v); strings.Contains(s, secretCred) || strings.Contains(s, fmt.Sprintf("%x", secretCred)) {
				t.Errorf("%s of %T shows the credential: %s", verb, v, s)
			}
		}
	}
	if s := ep.String(); !strings.Contains(s, "approvals.example.com") || !strings.Contains(s, "Credential: set") {
		t.Errorf("String says too little: %s", s)
	}
	if s := (approval.Endpoint{}).String(); !strings.Contains(s, "Credential: unset") {
		t.Errorf("%s", s)
	}
}

// TestCredentialNeverInErrors: a service that echoes the credential back
// in its problem detail does not get it into Clearance's errors.
func TestCredentialNeverInErrors(t *testing.T) {
	ctx := context.Background()
	fake := approvaltest.New(t, approvaltest.Options{Orgs: map[string]string{secretCred: "org-1"}})
	svc := approval.NewHTTP(outbound.New(outbound.Options{AllowPrivate: true}), approval.HTTPOptions{})
	ep := approval.Endpoint{BaseURL: fake.URL, Credential: secretCred, Issuer: fake.Issuer()}
	for _, status := range []int{400, 401, 403, 404, 409, 422, 500} {
		fake.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
			approvaltest.Problem(w, status, "ECHO", "you sent "+r.Header.Get("Authorization"))
			return true
		})
		_, err1 := svc.Get(ctx, ep, "apr_0001")
		_, err2 := svc.Open(ctx, ep, openReq("esc-1", intentA))
		_, err3 := approval.Verify(ctx, svc, ep, "apr_0001", approval.Binding{OrgID: "org-1", IntentHash: intentA})
		_, err4 := svc.PublicKey(ctx, ep, "kid")
		for _, err := range []error{err1, err2, err3, err4} {
			if err == nil || strings.Contains(err.Error(), secretCred) {
				t.Errorf("%d: %v", status, err)
			}
			if !strings.Contains(err.Error(), "ECHO") {
				t.Errorf("%d: the service's code is lost: %v", status, err)
			}
		}
		if status == 404 {
			wantErr(t, err3, approval.ErrEvidenceInvalid) // no such request for this org
		} else {
			wantErr(t, err3, approval.ErrUnavailable) // no answer usable as evidence
		}
		wantErr(t, err4, approval.ErrUnavailable) // a key set that cannot be read
	}
	fake.SetFault(nil)
	if _, err := svc.Open(ctx, ep, openReq("esc-1", intentA)); err != nil {
		t.Fatal(err)
	}
}

func TestEndpointValidate(t *testing.T) {
	good := approval.Endpoint{BaseURL: "https://approvals.example.com/tenant-a/", Credential: "c", Issuer: "https://approvals.example.com"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*approval.Endpoint){
		"no base":            func(e *approval.Endpoint) { e.BaseURL = "" },
		"relative base":      func(e *approval.Endpoint) { e.BaseURL = "/approvals" },
		"ftp base":           func(e *approval.Endpoint) { e.BaseURL = "ftp://approvals.example.com" },
		"base with query":    func(e *approval.Endpoint) { e.BaseURL = "https://approvals.example.com/?a=b" },
		"base with fragment": func(e *approval.Endpoint) { e.BaseURL = "https://approvals.example.com/#x" },
		"base with userinfo": func(e *approval.Endpoint) { e.BaseURL = "https://u:p@approvals.example.com/" },
		"base without host":  func(e *approval.Endpoint) { e.BaseURL = "https:///x" },
		"no credential":      func(e *approval.Endpoint) { e.Credential = "" },
		"credential space":   func(e *approval.Endpoint) { e.Credential = "a b" },
		"credential newline": func(e *approval.Endpoint) { e.Credential = "a\r\nX-Injected: 1" },
		"credential UTF-8":   func(e *approval.Endpoint) { e.Credential = "clé" },
		"credential long":    func(e *approval.Endpoint) { e.Credential = strings.Repeat("c", approval.MaxCredentialLength+1) },
		"no issuer":          func(e *approval.Endpoint) { e.Issuer = "" },
		"issuer control":     func(e *approval.Endpoint) { e.Issuer = "a\x00b" },
	} {
		e := good
		mutate(&e)
		err := e.Validate()
		if !errors.Is(err, approval.ErrInvalidEndpoint) {
			t.Errorf("%s: %v", name, err)
		}
		if e.Credential != "" && strings.Contains(fmt.Sprint(err), e.Credential) && len(e.Credential) > 3 {
			t.Errorf("%s: the error shows the credential", name)
		}
	}
}

// TestEndpointPolicy: the outbound client's rules apply to the base URL
// before anything is sent.
func TestEndpointPolicy(t *testing.T) {
	ctx := context.Background()
	fake := approvaltest.New(t, approvaltest.Options{})
	strict := approval.NewHTTP(outbound.New(outbound.Options{}), approval.HTTPOptions{})
	for _, base := range []string{
		fake.URL, // http: TLS required
		strings.Replace(fake.URL, "http://", "https://", 1), // loopback literal
		"https://localhost:1",
		"https://[::1]:1",
		"https://169.254.169.254",
	} {
		ep := approval.Endpoint{BaseURL: base, Credential: cred1, Issuer: "x"}
		_, err := strict.Get(ctx, ep, "apr_0001")
		wantErr(t, err, approval.ErrInvalidEndpoint)
		_, err = strict.PublicKey(ctx, ep, "kid")
		wantErr(t, err, approval.ErrInvalidEndpoint)
		_, err = approval.Verify(ctx, strict, ep, "apr_0001", approval.Binding{OrgID: "org-1", IntentHash: intentA})
		wantErr(t, err, approval.ErrInvalidEndpoint)
	}
	if n := len(fake.Calls()); n != 0 {
		t.Fatalf("%d requests reached the service", n)
	}
}

func TestStatic(t *testing.T) {
	ctx := context.Background()
	def := approval.Endpoint{BaseURL: "https://approvals.example.com", Credential: "c-default", Issuer: "https://approvals.example.com"}
	own := approval.Endpoint{BaseURL: "https://approvals.org-2.example", Credential: "c-2", Issuer: "https://approvals.org-2.example"}
	s := approval.Static{Default: def, Orgs: map[string]approval.Endpoint{"org-2": own, "org-3": {}}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		org  string
		want approval.Endpoint
		err  error
	}{
		{"org-1", def, nil},
		{"org-2", own, nil},
		{"org-3", approval.Endpoint{}, approval.ErrNotConfigured}, // turned off for this org
	} {
		got, err := s.Endpoint(ctx, tt.org)
		if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
			t.Errorf("%s: %v %v", tt.org, got, err)
		}
	}
	none := approval.Static{Orgs: map[string]approval.Endpoint{"org-2": own}}
	if _, err := none.Endpoint(ctx, "org-1"); !errors.Is(err, approval.ErrNotConfigured) {
		t.Fatal(err)
	}
	if e, err := none.Endpoint(ctx, "org-2"); err != nil || e != own {
		t.Fatal(err)
	}
	if err := (approval.Static{}).Validate(); err != nil {
		t.Fatalf("an empty directory is valid (no org has approvals): %v", err)
	}
	bad := approval.Static{Default: def, Orgs: map[string]approval.Endpoint{"org-2": {BaseURL: "https://x.example", Issuer: "x"}}}
	if err := bad.Validate(); !errors.Is(err, approval.ErrInvalidEndpoint) || !strings.Contains(err.Error(), "org-2") {
		t.Fatalf("%v", err)
	}
	bad = approval.Static{Default: approval.Endpoint{BaseURL: "ftp://x", Credential: "c", Issuer: "x"}}
	if err := bad.Validate(); !errors.Is(err, approval.ErrInvalidEndpoint) {
		t.Fatalf("%v", err)
	}
}
