package admin_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/admin"
	"github.com/clearancehq/clearance/store/pebblestore"
)

// Create an org, issue it a read-only key, and authenticate with each key.
// The engine's Admin is the admin feature; the store is in memory here (a
// real deployment passes a directory and no FS).
func ExampleService_CreateOrg() {
	backend, err := pebblestore.Open("clearance-data", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()
	engine, err := clearance.Open(backend, clearance.Options{})
	if err != nil {
		log.Fatal(err)
	}
	var svc *admin.Service = engine.Admin
	ctx := context.Background()

	created, err := svc.CreateOrg(ctx, "Acme Payments")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("org:", created.Org.Name, "first key scopes:", created.Key.Scopes)

	reader, err := svc.CreateAPIKey(ctx, created.Org.ID, []string{"decision:read"})
	if err != nil {
		log.Fatal(err)
	}
	for _, secret := range []string{created.Key.Secret, reader.Secret} {
		p, err := svc.Authenticate(ctx, secret)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("same org:", p.OrgID == created.Org.ID, "may write decisions:", p.Allows("decision:write"))
	}

	// A secret the store never issued authenticates nobody.
	_, err = svc.Authenticate(ctx, reader.Secret[:len(reader.Secret)-1]+"x")
	var ce *clearance.Error
	if errors.As(err, &ce) {
		fmt.Println(ce.Code)
	}
	// Output:
	// org: Acme Payments first key scopes: [org:*]
	// same org: true may write decisions: true
	// same org: true may write decisions: false
	// UNAUTHENTICATED
}

// Revoke every credential of an org at once, with a fresh key in return:
// the old keys stop working, the replacement works.
func ExampleService_RevokeOrgCredentials() {
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
	created, _ := engine.Admin.CreateOrg(ctx, "Acme Payments")
	second, _ := engine.Admin.CreateAPIKey(ctx, created.Org.ID, []string{"decision:write"})

	r, err := engine.Admin.RevokeOrgCredentials(ctx, created.Org.ID, "the owner", true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("revoked:", len(r.KeyIDs), "replacement scopes:", r.Replacement.Scopes)
	for _, secret := range []string{created.Key.Secret, second.Secret, r.Replacement.Secret} {
		_, err := engine.Admin.Authenticate(ctx, secret)
		fmt.Println("works:", err == nil)
	}
	// Output:
	// revoked: 2 replacement scopes: [org:*]
	// works: false
	// works: false
	// works: true
}
