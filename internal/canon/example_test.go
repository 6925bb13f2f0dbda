package canon_test

import (
	"fmt"

	"github.com/clearancehq/clearance/internal/canon"
)

// Whitespace and member order do not change a digest.
func ExampleDigestJSON() {
	a, _ := canon.DigestJSON([]byte(`{"b": 2, "a": 1.0}`))
	b, _ := canon.DigestJSON([]byte(`{"a":1,"b":2}`))
	c, _ := canon.Transform([]byte(`{"b": 2, "a": 1.0}`))
	fmt.Println(a == b, string(c))
	// Output: true {"a":1,"b":2}
}
