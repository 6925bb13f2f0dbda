package tenant_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/tenant"
)

func TestSecretsAreHashedAndMatched(t *testing.T) {
	secret, hash, err := tenant.NewSecret(bytes.NewReader(make([]byte, 32)), tenant.PrefixOrg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "clr_org_") || strings.Contains(hash, secret) || len(hash) != 64 {
		t.Fatalf("secret %q hash %q", secret, hash)
	}
	k := tenant.APIKey{Hash: hash}
	if !k.Matches(secret) || k.Matches(secret+"x") {
		t.Fatal("Matches is wrong")
	}
	if _, _, err := tenant.NewSecret(bytes.NewReader(nil), tenant.PrefixOrg); err == nil {
		t.Fatal("short randomness accepted")
	}
}

func TestScopes(t *testing.T) {
	if _, err := tenant.ParseScopes([]string{"decision:write", "nope"}); err == nil {
		t.Fatal("unknown scope accepted")
	}
	if _, err := tenant.ParseScopes(nil); err == nil {
		t.Fatal("no scopes accepted")
	}
	sc, err := tenant.ParseScopes([]string{"decision:read", "decision:read"})
	if err != nil || len(sc) != 1 {
		t.Fatalf("%v %v", sc, err)
	}
	read := tenant.APIKey{Kind: tenant.KindOrg, Scopes: sc}
	if !read.Allows(tenant.ScopeDecisionRead, tenant.ScopeAuditRead) || read.Allows(tenant.ScopeDecisionWrite) {
		t.Fatal("Allows is wrong for a narrow key")
	}
	all := tenant.APIKey{Kind: tenant.KindOrg, Scopes: []tenant.Scope{tenant.ScopeOrgAll}}
	plat := tenant.APIKey{Kind: tenant.KindPlatform}
	if !all.Allows(tenant.ScopePolicyWrite) || !plat.Allows(tenant.ScopeAuditWrite) {
		t.Fatal("org:* and the platform key allow everything")
	}
}

func ExampleAPIKey_Allows() {
	k := tenant.APIKey{Kind: tenant.KindOrg, Scopes: []tenant.Scope{tenant.ScopeDecisionWrite}}
	fmt.Println(k.Allows(tenant.ScopeDecisionWrite), k.Allows(tenant.ScopePolicyWrite))
	// Output: true false
}
