package connector_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/internal/mail"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// An automation platform connects to a workspace: it is registered, the
// owner (signed in) approves its authorization request, and the code it
// gets back is exchanged, once, with its PKCE verifier.
func ExampleService_Exchange() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "connector-example-")
	defer os.RemoveAll(dir)
	backend, _ := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	defer backend.Close()
	mailer, _ := clearance.NewMailer("", dir, "clearance@example.com", nil)
	engine, _ := clearance.Open(backend, clearance.Options{Mailer: mailer,
		SecretsKey: []byte("example-secrets-key-of-32-bytes!!")})
	ob := engine.Onboarding
	codeOf := func() string {
		msgs, _ := mail.ReadMailbox(filepath.Join(dir, "mailbox"))
		return regexp.MustCompile(`code is ([0-9]{6})`).FindStringSubmatch(msgs[len(msgs)-1].Text)[1]
	}

	// The owner signs up, then signs in (the session a browser would hold).
	_, _ = ob.Start(ctx, []byte(`{"owner_email":"ada@example.com","owner_name":"Ada","org_name":"Acme"}`))
	v, _ := ob.Verify(ctx, fmt.Appendf(nil, `{"owner_email":"ada@example.com","otp_code":%q}`, codeOf()))
	_, _ = ob.StartSignIn(ctx, []byte(`{"email":"ada@example.com"}`))
	in, _ := ob.VerifySignIn(ctx, fmt.Appendf(nil, `{"email":"ada@example.com","otp_code":%q}`, codeOf()))
	session, _ := ob.Session(ctx, in.Secret)

	client, _ := engine.Connector.RegisterClient(ctx, []byte(`{"name":"Flows","redirect_uris":["https://flows.example/cb"]}`))
	verifier := "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	sum := sha256.Sum256([]byte(verifier))
	a, err := engine.Connector.CheckAuthorize(ctx, url.Values{"response_type": {"code"}, "client_id": {client.ClientID},
		"redirect_uri": {"https://flows.example/cb"}, "state": {"s1"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	back, _ := engine.Connector.Approve(ctx, session, a, v.OrgID)
	u, _ := url.Parse(back)
	tok, err := engine.Connector.Exchange(ctx, url.Values{"grant_type": {"authorization_code"}, "code": {u.Query().Get("code")},
		"redirect_uri": {"https://flows.example/cb"}, "client_id": {client.ClientID}, "code_verifier": {verifier}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(u.Query().Get("state"), tok.TokenType, tok.Scope, tok.OrgID == v.OrgID)
	_, err = engine.Connector.Exchange(ctx, url.Values{"grant_type": {"authorization_code"}, "code": {u.Query().Get("code")},
		"redirect_uri": {"https://flows.example/cb"}, "client_id": {client.ClientID}, "code_verifier": {verifier}})
	fmt.Println(err)
	// Output:
	// s1 Bearer automation decision:write decision:read true
	// invalid_grant: the code is unknown, expired, used, or not this client's
}

// A connected platform registers a callback URL for decision.resolved: its
// signing secret is answered this once; the list never shows it.
func ExampleService_AddWebhook() {
	ctx := context.Background()
	backend, _ := pebblestore.Open("db", pebblestore.Options{FS: vfs.NewMem()})
	defer backend.Close()
	engine, _ := clearance.Open(backend, clearance.Options{SecretsKey: []byte("example-secrets-key-of-32-bytes!!")})
	org, _ := engine.Admin.CreateOrg(ctx, "Acme")
	caller, _ := engine.Admin.Authenticate(ctx, org.Key.Secret) // the platform's credential

	cb, err := engine.Connector.AddWebhook(ctx, caller, []byte(`{"url":"https://flows.example/hooks/42","filter":{"outcomes":["BLOCK"]}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cb.Event, strings.HasPrefix(cb.SigningSecret, "clr_whsec_"))
	_, err = engine.Connector.AddWebhook(ctx, caller, []byte(`{"url":"https://10.0.0.5/hook"}`))
	fmt.Println(err != nil)
	list, _ := engine.Connector.Webhooks(ctx, org.Org.ID)
	fmt.Println(len(list), list[0].URL)
	fmt.Println(engine.Connector.RemoveWebhook(ctx, org.Org.ID, cb.SubscriptionID))
	// Output:
	// decision.resolved true
	// true
	// 1 https://flows.example/hooks/42
	// <nil>
}
