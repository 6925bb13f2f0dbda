package core_test

import (
	"errors"
	"fmt"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/internal/coded"
	"github.com/clearancehq/clearance/internal/core"
)

// A domain refusal takes the Kind of its sentinel's row; anything the table
// does not know — above all a storage failure — is a 503 that never
// authorizes.
func ExampleTranslate() {
	refused := coded.New(claim.CodeReplay, claim.ErrReplay, "grant g-1")
	err := core.Translate("claim", refused)
	fmt.Println(errors.Is(err, core.ErrConflict), err.(*core.Error).Code)

	err = core.Translate("claim", errors.New("connection reset"))
	fmt.Println(errors.Is(err, core.ErrUnavailable), err.(*core.Error).Code)
	// Output:
	// true CLAIM_REPLAY
	// true STORE_UNAVAILABLE
}
