package approval_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/approval/approvaltest"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/outbound"
)

// exampleTB is what the fake approval service needs of a test, for
// examples, which have none.
type exampleTB struct{}

func (exampleTB) Helper()                        {}
func (exampleTB) Cleanup(func())                 {}
func (exampleTB) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

func ExampleVerify() {
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	key, err := grant.KeyFromSeed(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		panic(err)
	}
	// A fake approval service on loopback stands in for the org's.
	fake := approvaltest.New(exampleTB{}, approvaltest.Options{Key: key, Issuer: "https://approvals.example", Now: now})
	defer fake.Close()

	// AllowPrivate only because the fake listens on loopback.
	svc := approval.NewHTTP(outbound.New(outbound.Options{AllowPrivate: true}), approval.HTTPOptions{Now: now})
	ep := approval.Endpoint{BaseURL: fake.URL, Credential: "cred-org-1", Issuer: "https://approvals.example"}
	intent := "sha256:" + strings.Repeat("ab", 32)

	req, err := svc.Open(ctx, ep, approval.OpenRequest{OrgID: "org-1", EscalationID: "esc-1", IntentHash: intent,
		Actor:     approval.Actor{ID: "agent-7", Type: "agent"},
		Action:    approval.Action{Type: "PAYMENT", Amount: "1250.00", Currency: "EUR"},
		ExpiresAt: now().Add(time.Hour)})
	if err != nil {
		panic(err)
	}
	want := approval.Binding{OrgID: "org-1", IntentHash: intent}

	v, err := approval.Verify(ctx, svc, ep, req.RequestID, want)
	fmt.Println(v.Status, v.Approved(), err)

	fake.Approve(req.RequestID, "alice") // a human approves at the service
	v, err = approval.Verify(ctx, svc, ep, req.RequestID, want)
	fmt.Println(v.Status, v.Approved(), v.Receipt.Approver, v.Receipt.Presence, err)

	// The approval is for this intent only.
	_, err = approval.Verify(ctx, svc, ep, req.RequestID, approval.Binding{OrgID: "org-1", IntentHash: "sha256:" + strings.Repeat("cd", 32)})
	fmt.Println(errors.Is(err, approval.ErrEvidenceInvalid))

	fake.Revoke(req.RequestID) // an operator withdraws it
	_, err = approval.Verify(ctx, svc, ep, req.RequestID, want)
	var e *approval.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code(), e.Status)
	}
	// Output:
	// PENDING false <nil>
	// APPROVED true alice webauthn-uv <nil>
	// true
	// APPROVAL_NOT_APPROVED REVOKED
}

func ExampleStatic() {
	dir := approval.Static{
		Default: approval.Endpoint{BaseURL: "https://approvals.example", Credential: "s3cret", Issuer: "https://approvals.example"},
		Orgs:    map[string]approval.Endpoint{"org-without": {}},
	}
	if err := dir.Validate(); err != nil {
		panic(err)
	}
	ep, err := dir.Endpoint(context.Background(), "org-1")
	fmt.Println(ep, err)
	_, err = dir.Endpoint(context.Background(), "org-without")
	fmt.Println(errors.Is(err, approval.ErrNotConfigured))
	// Output:
	// approval.Endpoint{BaseURL: "https://approvals.example", Issuer: "https://approvals.example", Credential: set} <nil>
	// true
}
