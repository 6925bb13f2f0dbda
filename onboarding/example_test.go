package onboarding_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/mail"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// From an e-mail address to an org key: the code arrives in the mailbox,
// verifies into an onboarding grant, and the grant takes the bundle once.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "onboarding-example-")
	defer os.RemoveAll(dir)
	backend, _ := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	defer backend.Close()
	mailer, _ := clearance.NewMailer("", dir, "clearance@example.com", nil)
	engine, _ := clearance.Open(backend, clearance.Options{Mailer: mailer,
		SecretsKey: []byte("example-secrets-key-of-32-bytes!!")})

	started, _ := engine.Onboarding.Start(ctx, []byte(`{"owner_email":"ada@example.com","owner_name":"Ada","org_name":"Acme"}`))
	fmt.Println(started.Status)

	msgs, _ := mail.ReadMailbox(filepath.Join(dir, "mailbox"))
	code := regexp.MustCompile(`code is ([0-9]{6})`).FindStringSubmatch(msgs[0].Text)[1]
	v, err := engine.Onboarding.Verify(ctx, fmt.Appendf(nil, `{"owner_email":"ada@example.com","otp_code":%q}`, code))
	if err != nil {
		fmt.Println(err)
		return
	}
	grant, _ := engine.Admin.Authenticate(ctx, v.OnboardingGrant)
	sess, _ := engine.Onboarding.CreateSession(ctx, grant, fmt.Appendf(nil, `{"org_id":%q}`, v.OrgID))
	b, err := engine.Onboarding.IssueBundle(ctx, grant, sess.SessionID,
		[]byte(`{"provider_key":"stripe","workflow_key":"ap.invoice","source_label":"Stripe payouts"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.Scopes, b.PolicyVersion, b.WebhookPath == "/v1/signals/webhooks/"+b.ConnectorID)
	_, err = engine.Admin.Authenticate(ctx, v.OnboardingGrant)
	fmt.Println("grant after the bundle:", err != nil)
	// Output:
	// code_sent
	// [org:*] starter-1 true
	// grant after the bundle: true
}

// An agent starts a workspace with no human: a SHADOW-only key and a claim
// code. An owner signs in by e-mail code later and claims it, once, for
// the org's org:* key.
func ExampleService_Provision() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "onboarding-example-")
	defer os.RemoveAll(dir)
	backend, _ := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	defer backend.Close()
	mailer, _ := clearance.NewMailer("", dir, "clearance@example.com", nil)
	engine, _ := clearance.Open(backend, clearance.Options{Mailer: mailer,
		SecretsKey: []byte("example-secrets-key-of-32-bytes!!")})

	p, err := engine.Onboarding.Provision(ctx, "203.0.113.7", []byte(`{"name":"Invoice agent"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Mode, p.Scopes, p.PolicyVersion)

	_, _ = engine.Onboarding.StartSignIn(ctx, []byte(`{"email":"ada@example.com"}`))
	msgs, _ := mail.ReadMailbox(filepath.Join(dir, "mailbox"))
	code := regexp.MustCompile(`code is ([0-9]{6})`).FindStringSubmatch(msgs[0].Text)[1]
	in, _ := engine.Onboarding.VerifySignIn(ctx, fmt.Appendf(nil, `{"email":"ada@example.com","otp_code":%q}`, code))
	session, _ := engine.Onboarding.Session(ctx, in.Secret)
	c, err := engine.Onboarding.Claim(ctx, session, fmt.Appendf(nil, `{"claim_code":%q}`, p.ClaimCode))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.OrgID == p.OrgID, c.Scopes)
	_, err = engine.Onboarding.Claim(ctx, session, fmt.Appendf(nil, `{"claim_code":%q}`, p.ClaimCode))
	fmt.Println(err)
	// Output:
	// SHADOW [decision:write decision:read] starter-1
	// true [org:*]
	// WORKSPACE_ALREADY_CLAIMED: the workspace was claimed already; its owner's key was shown then
}

// The operator console signs an owner in with their account: the session
// is traded for a short-lived console key of one of its workspaces, an
// ordinary bearer key, which signing out revokes.
func ExampleService_IssueConsoleKey() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "onboarding-example-")
	defer os.RemoveAll(dir)
	backend, _ := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	defer backend.Close()
	mailer, _ := clearance.NewMailer("", dir, "clearance@example.com", nil)
	engine, _ := clearance.Open(backend, clearance.Options{Mailer: mailer,
		SecretsKey: []byte("example-secrets-key-of-32-bytes!!")})
	p, _ := engine.Onboarding.Provision(ctx, "203.0.113.7", []byte(`{"name":"Invoice agent"}`))

	_, _ = engine.Onboarding.StartSignIn(ctx, []byte(`{"email":"ada@example.com"}`))
	msgs, _ := mail.ReadMailbox(filepath.Join(dir, "mailbox"))
	code := regexp.MustCompile(`code is ([0-9]{6})`).FindStringSubmatch(msgs[0].Text)[1]
	in, _ := engine.Onboarding.VerifySignIn(ctx, fmt.Appendf(nil, `{"email":"ada@example.com","otp_code":%q}`, code))
	session, _ := engine.Onboarding.Session(ctx, in.Secret)
	_, _ = engine.Onboarding.Claim(ctx, session, fmt.Appendf(nil, `{"claim_code":%q}`, p.ClaimCode))

	k, err := engine.Onboarding.IssueConsoleKey(ctx, session, p.OrgID)
	if err != nil {
		fmt.Println(err)
		return
	}
	principal, _ := engine.Admin.Authenticate(ctx, k.Secret)
	fmt.Println(principal.OrgID == p.OrgID, k.Scopes)
	_ = engine.Onboarding.SignOut(ctx, session)
	_, err = engine.Admin.Authenticate(ctx, k.Secret)
	fmt.Println("after sign-out:", err)
	// Output:
	// true [decision:read policy:read audit:read escalation:write]
	// after sign-out: UNAUTHENTICATED: the credential expired or was revoked
}
