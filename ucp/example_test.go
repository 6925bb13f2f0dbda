package ucp_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/clearancehq/clearance/ucp"
)

// merchantJWK is the public key of the test merchant that signed the ap2
// fixtures in testdata.
const merchantJWK = `{"kty":"EC","crv":"P-256","kid":"merchant-2026","use":"sig",` +
	`"x":"pAlV_i-oFov22_vYLgpka1pzwwpyoW7chboti_eQtw0","y":"ERvqjAcOqZdemwdU-f07GKlnyMSTnho1iEgFY8ChPGc"}`

func mustRead(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return b
}

func ExampleReleases() {
	fmt.Println(ucp.Releases())
	// Output: [2026-04-08 2026-08-25]
}

func ExampleParse() {
	c, err := ucp.Parse(mustRead("testdata/2026-08-25/checkout-response-2026-08-25-ready-for-complete.json"))
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Release, c.ID, c.Status, c.Currency)
	fmt.Println("subtotal", c.Subtotal, "total", c.Total)
	for _, li := range c.LineItems {
		fmt.Println(li.ItemID, li.Quantity, "x", li.Price)
	}
	fmt.Println(c.PaymentHandlers[0].Namespace, c.PaymentHandlers[0].ID)
	fmt.Println(c.Digest)
	// Output:
	// 2026-08-25 chk_1234567890 ready_for_complete USD
	// subtotal 5000 total 5400
	// item_123 2 x 2500
	// com.shopify.shop_pay shop_pay_1234
	// sha256:9d370d8624cfc204fb4da253a210505240cf6d245ce7644f8ed227d3e0933944
}

func ExampleParse_refused() {
	_, err := ucp.Parse([]byte(`{"ucp":{"version":"2026-08-25","payment_handlers":{}},"id":"chk_1",
		"line_items":[{"id":"li_1","item":{"id":"sku","title":"Tee","price":2500.0},"quantity":1,"totals":[]}],
		"status":"incomplete","currency":"USD","links":[],
		"totals":[{"type":"subtotal","amount":2500},{"type":"total","amount":2500}]}`))
	var e *ucp.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code, e.Pointer)
	}
	_, err = ucp.Parse([]byte(`{"ucp":{"version":"2025-01-01"}}`))
	fmt.Println(errors.Is(err, ucp.ErrUnsupportedRelease))
	// Output:
	// UCP_ENVELOPE_INVALID /line_items/0/item/price
	// true
}

func ExampleParseMerchantJWK() {
	k, err := ucp.ParseMerchantJWK([]byte(merchantJWK))
	if err != nil {
		panic(err)
	}
	fmt.Println(k.KID, k.Curve, k.Alg)
	_, err = ucp.ParseMerchantJWK([]byte(`{"kty":"EC","crv":"P-256","d":"AAAA","x":"","y":""}`))
	fmt.Println(errors.Is(err, ucp.ErrPrivateKeyMaterial))
	// Output:
	// merchant-2026 P-256 ES256
	// true
}

func ExampleMerchantKey_PublicJWK() {
	k, err := ucp.ParseMerchantJWK([]byte(merchantJWK))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(k.PublicJWK()))
	// Output: {"alg":"ES256","crv":"P-256","kid":"merchant-2026","kty":"EC","use":"sig","x":"pAlV_i-oFov22_vYLgpka1pzwwpyoW7chboti_eQtw0","y":"ERvqjAcOqZdemwdU-f07GKlnyMSTnho1iEgFY8ChPGc"}
}

func ExampleVerifyTerms() {
	c, err := ucp.Parse(mustRead("testdata/2026-08-25/checkout-response-2026-08-25-ready-for-complete-ap2.json"))
	if err != nil {
		panic(err)
	}
	key, err := ucp.ParseMerchantJWK([]byte(merchantJWK))
	if err != nil {
		panic(err)
	}
	lookup := func(kid string) (ucp.MerchantKey, error) {
		if kid != key.KID {
			return ucp.MerchantKey{}, fmt.Errorf("kid %q: %w", kid, ucp.ErrUnknownKey)
		}
		return key, nil
	}
	fmt.Println(c.Terms.KID, c.Terms.Alg, ucp.VerifyTerms(c, lookup))
	// Output: merchant-2026 ES256 <nil>
}

func ExampleCheckout_TermsPayload() {
	signed, err := ucp.Parse(mustRead("testdata/2026-08-25/checkout-response-2026-08-25-ready-for-complete-ap2.json"))
	if err != nil {
		panic(err)
	}
	plain, err := ucp.Parse(mustRead("testdata/2026-08-25/checkout-response-2026-08-25-ready-for-complete.json"))
	if err != nil {
		panic(err)
	}
	payload, err := signed.TermsPayload()
	if err != nil {
		panic(err)
	}
	// The merchant signs the envelope without ap2.
	fmt.Println(string(payload) == string(plain.Canonical))
	// Output: true
}

func ExampleCheckMandate() {
	c, err := ucp.Parse(mustRead("testdata/2026-04-08/checkout-response-2026-04-08-ready-for-complete-ap2-mandate.json"))
	if err != nil {
		panic(err)
	}
	fmt.Println(ucp.CheckMandate(c))
	c.Mandate = c.Mandate[:len(c.Mandate)-1] // break the key-binding JWT's signature segment
	fmt.Println(errors.Is(ucp.CheckMandate(c), ucp.ErrInvalidMandate))
	// Output:
	// <nil>
	// true
}
