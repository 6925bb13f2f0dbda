package jsonw_test

import (
	"fmt"

	"github.com/clearancehq/clearance/internal/jsonw"
)

func ExampleOpen() {
	o := jsonw.Open(nil)
	o.String("outcome", "ALLOW")
	o.Strings("reason_codes", []string{"POLICY_MATCHED"})
	o.Uint("ledger_seq", 3)
	o.OmitEmpty("correlation_id", "")
	fmt.Println(string(o.Close()))
	// Output: {"outcome":"ALLOW","reason_codes":["POLICY_MATCHED"],"ledger_seq":3}
}
