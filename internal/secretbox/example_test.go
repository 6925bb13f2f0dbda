package secretbox_test

import (
	"fmt"

	"github.com/clearancehq/clearance/internal/secretbox"
)

// A callback signing secret is sealed for its destination and opened only
// there.
func Example() {
	box, _ := secretbox.New([]byte("a data key of at least thirty-two bytes"))
	sealed, _ := box.Seal([]byte("whsec_example"), "webhook/org_1/default")
	secret, _ := box.Open(sealed, "webhook/org_1/default")
	_, err := box.Open(sealed, "webhook/org_2/default")
	fmt.Println(string(secret), err != nil)
	// Output: whsec_example true
}
