package client_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/client"
)

// An envelope of a decision of deployment A, trusted and presented by an
// org of deployment B.
func TestFederation(t *testing.T) {
	t.Parallel()
	a := newServerWith(t, serverConfig{issuer: "https://a.example"})
	b := newServerWith(t, serverConfig{issuer: "https://b.example"})
	issuerOrg, receiverOrg := a.newOrg("Issuer"), b.newOrg("Receiver")
	ctx := t.Context()

	trust, err := receiverOrg.c.TrustedIssuers(ctx)
	if err != nil || trust.Audience != "https://b.example/federation/"+receiverOrg.ID || len(trust.Issuers) != 0 {
		t.Fatalf("trust list %+v: %v", trust, err)
	}
	d := issuerOrg.decide(t, 10)
	env, err := issuerOrg.c.IssueFederationEnvelope(ctx, client.IssueFederationEnvelopeJSONBody{DossierId: d.DossierId, Audience: trust.Audience})
	if err != nil || env.Issuer != "https://a.example" || env.Audience != trust.Audience || env.DecisionId != d.DecisionId.String() ||
		strings.Count(env.Envelope, ".") != 2 {
		t.Fatalf("envelope %+v: %v", env, err)
	}

	// Not trusted yet.
	req := decisionRequest(t, 10)
	req.FederatedDecisions = &[]string{env.Envelope}
	_, err = receiverOrg.c.EvaluateDecision(ctx, req)
	wantCode(t, err, http.StatusBadRequest, "FEDERATED_DECISION_INVALID")

	jwksRaw, err := a.client("").GrantJWKS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var jwks map[string]any
	if err := json.Unmarshal(jwksRaw, &jwks); err != nil {
		t.Fatal(err)
	}
	entry := client.PutTrustedIssuerJSONBody{Jwks: &jwks, Orgs: []client.UUID{issuerOrg.UUID}}
	var got client.Response
	put, err := receiverOrg.c.PutTrustedIssuer(ctx, "https://a.example", entry, client.Received(&got))
	if err != nil || got.Status != http.StatusCreated || put.Issuer != "https://a.example" || len(put.Orgs) != 1 {
		t.Fatalf("trust A (%d) %+v: %v", got.Status, put, err)
	}
	read, err := receiverOrg.c.TrustedIssuer(ctx, "https://a.example")
	if err != nil || read.Issuer != "https://a.example" || read.Jwks == nil {
		t.Fatalf("read entry %+v: %v", read, err)
	}
	if trust, err := receiverOrg.c.TrustedIssuers(ctx); err != nil || len(trust.Issuers) != 1 {
		t.Fatalf("trust list %+v: %v", trust, err)
	}
	accepted, err := receiverOrg.c.EvaluateDecision(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	dossier, err := receiverOrg.c.Dossier(ctx, accepted.DossierId.String())
	if err != nil || dossier.Federation == nil || len(*dossier.Federation) != 1 || (*dossier.Federation)[0].DecisionId != d.DecisionId.String() {
		t.Fatalf("the dossier records the envelope %+v: %v", dossier.Federation, err)
	}

	deleted, err := receiverOrg.c.DeleteTrustedIssuer(ctx, "https://a.example")
	if err != nil || deleted.Issuer != "https://a.example" {
		t.Fatalf("delete entry %+v: %v", deleted, err)
	}
	_, err = receiverOrg.c.TrustedIssuer(ctx, "https://a.example")
	wantCode(t, err, http.StatusNotFound, "TRUSTED_ISSUER_NOT_FOUND")
}
