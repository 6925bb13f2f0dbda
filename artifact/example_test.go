package artifact_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/artifact"
)

// Backends refuse, with the same errors, every record Validate refuses and
// every record of another org than their transaction's.
func ExampleRecord_Validate() {
	r := artifact.Record{
		OrgID:     "org_1",
		Kind:      "override",
		ID:        "ovr_1",
		Ref:       "dos_1",
		CreatedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		Body:      []byte(`{"by":"alice","outcome":"ALLOW"}`),
	}
	fmt.Println(r.Validate())

	bad := r
	bad.Kind = "Override"
	err := bad.Validate()
	fmt.Println(err, errors.Is(err, artifact.ErrInvalid))

	bad = r
	bad.Ref = "dos\x001"
	fmt.Println(bad.Validate())

	err = r.ValidateFor("org_2")
	fmt.Println(errors.Is(err, artifact.ErrOrgMismatch))
	// Output:
	// <nil>
	// artifact: invalid: kind: byte 0x4f at 0 is not one of [a-z0-9_.-] true
	// artifact: invalid: ref: control character U+0000 at byte 3
	// true
}
