package console_test

import (
	"bytes"
	"fmt"

	"github.com/clearancehq/clearance/console"
)

// A server answers GET /console with Page and GET /console/assets/{name}
// with Asset, under a policy that runs only these files.
func ExampleAsset() {
	_, mediaType, ok := console.Asset("app.js")
	fmt.Println(mediaType, ok)
	_, _, ok = console.Asset("index.html")
	fmt.Println(ok)
	fmt.Println(bytes.Contains(console.Page(), []byte(`src="/console/assets/app.js"`)))
	// Output:
	// application/javascript; charset=utf-8 true
	// false
	// true
}
