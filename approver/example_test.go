package approver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/clearancehq/clearance/approver"
	"github.com/clearancehq/clearance/grant"
)

// Example runs the approval service in process and opens an approval
// request the way Clearance does when a policy escalates. A human then
// decides at the request's approval_url with a passkey.
func Example() {
	key, err := grant.KeyFromSeed(bytes.Repeat([]byte{7}, 32)) // in production: approver.LoadOrCreateKey(dataDir)
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	svc, err := approver.New(approver.Options{
		PublicURL:   "https://approvals.example.com",
		SigningKey:  key,
		Credentials: map[string]string{"clearance-credential-of-org-1": "org_1"}, // credential → org
		Now:         func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(svc)
	defer srv.Close()

	body, _ := json.Marshal(approver.OpenRequest{
		OrgID:        "org_1",
		EscalationID: "esc_42",
		IntentHash:   "sha256:" + strings.Repeat("ab", 32),
		Actor:        approver.Actor{ID: "agent-7", Type: "agent"},
		Action:       approver.Action{Type: "payment.send", Amount: "1250.00", Currency: "EUR", Target: "acct:1234", WorkflowKey: "vendor-payout"},
		ExpiresAt:    now.Add(time.Hour).Format(time.RFC3339),
	})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/approval-requests", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer clearance-credential-of-org-1")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	var r approver.ApprovalRequest
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		panic(err)
	}
	fmt.Println(res.StatusCode, r.Status, r.ExpiresAt.Format(time.RFC3339))
	fmt.Println(strings.HasPrefix(r.ApprovalURL, "https://approvals.example.com/approve/"))
	// Output:
	// 201 PENDING 2026-01-02T16:00:00Z
	// true
}

// ExampleNewCompletionNotifier sends Clearance a completion hint after
// every decision, in the background.
func ExampleNewCompletionNotifier() {
	notifier, err := approver.NewCompletionNotifier(approver.NotifierOptions{
		ClearanceURL: "https://clearance.example.com",
		Keys:         map[string]string{"org_1": "clr_org_…"}, // org → Clearance API key
	})
	if err != nil {
		panic(err)
	}
	key, _ := grant.KeyFromSeed(bytes.Repeat([]byte{7}, 32))
	_, err = approver.New(approver.Options{
		PublicURL:  "https://approvals.example.com",
		SigningKey: key,
		OnDecision: notifier.Notify,
	})
	fmt.Println(err)
	// Output: <nil>
}
