package policies_test

import (
	"context"
	"fmt"
	"log"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/store/pebblestore"
)

func bundle(version, limit string) []byte {
	return []byte(`{"bundle_id":"pay","version":"` + version + `","mode":"ENFORCEMENT","rules":[
 {"id":"big","match":[{"field":"amount","op":"ge","value":` + limit + `}],"outcome":"BLOCK","reason_codes":["TOO_BIG"]}],
 "default":{"outcome":"ALLOW","reason_codes":["OK"]}}`)
}

// Publish activates a version; Stage keeps the active one deciding until
// the staged version is activated on purpose. A pin to a version that is
// not the active one is evaluated, in SHADOW only.
func ExampleService_ActivateBundle() {
	ctx := context.Background()
	backend, _ := pebblestore.Open("", pebblestore.Options{FS: vfs.NewMem()})
	defer backend.Close()
	engine, _ := clearance.Open(backend, clearance.Options{})
	org, _ := engine.Admin.CreateOrg(ctx, "Acme")
	p := engine.Policies

	if _, err := p.PublishBundle(ctx, org.Org.ID, bundle("v1", "10000")); err != nil {
		fmt.Println(err)
		return
	}
	p.StageBundle(ctx, org.Org.ID, bundle("v2", "500"))
	res, _ := p.Resolve(ctx, org.Org.ID, "v2")
	fmt.Println("pinned v2 authorizes:", res.Authorizes())

	a, err := p.ActivateBundle(ctx, policies.ActivateRequest{OrgID: org.Org.ID, Version: "v2", ExpectedActiveVersion: "v1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("active:", a.ActiveVersion, "previous:", a.PreviousVersion, "changed:", a.Changed)
	list, _ := p.Bundles(ctx, org.Org.ID)
	for _, b := range list {
		fmt.Println(b.Version, b.Active)
	}
	_, err = p.ActivateBundle(ctx, policies.ActivateRequest{OrgID: org.Org.ID, Version: "v1", ExpectedActiveVersion: "v1"})
	fmt.Println(err.(*clearance.Error).Code)
	// Output:
	// pinned v2 authorizes: false
	// active: v2 previous: v1 changed: true
	// v1 false
	// v2 true
	// ACTIVE_VERSION_MISMATCH
}

// The starter policy, installed for an org with no policy of its own (the
// automation connector does this), and never over one.
func ExampleService_InstallStarter() {
	backend, err := pebblestore.Open("clearance-data", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()
	engine, err := clearance.Open(backend, clearance.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	o, _ := engine.Admin.CreateOrg(ctx, "Acme")
	first, _ := engine.Policies.InstallStarter(ctx, o.Org.ID)
	again, _ := engine.Policies.InstallStarter(ctx, o.Org.ID)
	fmt.Println(first.Installed, first.PolicyVersion, again.Installed)
	// Output:
	// true starter-1 false
}
