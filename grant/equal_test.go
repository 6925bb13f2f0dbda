package grant_test

import (
	"reflect"
	"testing"

	"github.com/clearancehq/clearance/grant"
)

// TestClaimsEqual changes each member of Claims (and of its act) in turn,
// found by reflection so that a member added later is covered too: every
// change makes the claims unequal; equal values in other memory are equal.
func TestClaimsEqual(t *testing.T) {
	base := testClaims()
	same := testClaims() // its own amount pointer
	if !base.Equal(same) || !same.Equal(base) {
		t.Fatal("equal claims compare unequal")
	}
	var edits []func(c *grant.Claims) string
	addEdits := func(typ reflect.Type, at func(c *grant.Claims) reflect.Value) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			edits = append(edits, func(c *grant.Claims) string {
				v := at(c).Field(i)
				switch v.Kind() {
				case reflect.String:
					v.SetString(v.String() + "x")
				case reflect.Int64:
					v.SetInt(v.Int() + 1)
				case reflect.Pointer: // the amount
					if v.IsNil() {
						n := 1.0
						v.Set(reflect.ValueOf(&n))
					} else {
						n := v.Elem().Float() + 1
						v.Set(reflect.ValueOf(&n))
					}
				case reflect.Struct: // act: covered member by member
					return ""
				default:
					t.Fatalf("member %s of kind %s: teach this test to change it", f.Name, v.Kind())
				}
				return f.Name
			})
		}
	}
	addEdits(reflect.TypeFor[grant.Claims](), func(c *grant.Claims) reflect.Value { return reflect.ValueOf(c).Elem() })
	addEdits(reflect.TypeFor[grant.Action](), func(c *grant.Claims) reflect.Value { return reflect.ValueOf(&c.Action).Elem() })
	for _, edit := range edits {
		c := testClaims()
		name := edit(&c)
		if name == "" {
			continue
		}
		if base.Equal(c) || c.Equal(base) {
			t.Errorf("claims with another %s compare equal", name)
		}
	}
	noAmount := testClaims()
	noAmount.Action.Amount = nil
	if base.Equal(noAmount) || noAmount.Equal(base) {
		t.Error("an act without amount equals one with")
	}
}
