package server_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clearancehq/clearance/server"
	"github.com/clearancehq/clearance/tenant"
)

// checkoutArgs are what the UCP routes' bad requests aim at, made by
// checkoutTargets before the ledgers are sealed.
type checkoutArgs struct {
	merchant *ecdsa.PrivateKey // org a's ACTIVE merchant key, registered as checkoutMerchantKID
	spare    string            // another ACTIVE merchant kid of org a: the accepted revocation's target
	foreign  string            // org b's ACTIVE merchant kid
}

// Kids of the bad-input suite's merchant keys.
const (
	checkoutMerchantKID = "badinput-merchant"
	checkoutSpareKID    = "badinput-merchant-spare"
	checkoutForeignKID  = "badinput-merchant-foreign"
	checkoutNewKID      = "badinput-merchant-new"
)

// checkoutTargets registers org a's merchant key and a spare one, and one
// of org b.
func (s *badSuite) checkoutTargets() checkoutArgs {
	t, x := s.t, s.x
	a := checkoutArgs{merchant: newMerchantKey(t, elliptic.P256()), spare: checkoutSpareKID, foreign: checkoutForeignKID}
	x.registerMerchant(t, s.a.Key, checkoutMerchantKID, merchantJWK(a.merchant)).want(t, http.StatusCreated)
	x.registerMerchant(t, s.a.Key, a.spare, merchantJWK(newMerchantKey(t, elliptic.P384()))).want(t, http.StatusCreated)
	x.registerMerchant(t, s.b.Key, a.foreign, merchantJWK(newMerchantKey(t, elliptic.P256()))).want(t, http.StatusCreated)
	return a
}

// envelopeRefusal is a checkout envelope the authority refuses before any
// policy sees it: the answer's code and the JSON pointer it names ("-":
// the case does not pin it).
type envelopeRefusal struct {
	category, name string
	body           string
	code, pointer  string
}

// envelopeEditor derives envelopes from a signed base checkout.
type envelopeEditor struct {
	t    testing.TB
	base []byte // the accepted body: signed, valid
	key  *ecdsa.PrivateKey
}

// tree decodes the base with its number literals kept.
func (e envelopeEditor) tree() map[string]any {
	e.t.Helper()
	dec := json.NewDecoder(bytes.NewReader(e.base))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

// signed is the base changed by edit and signed again, so that its terms
// verify and the defect edit made is what is refused.
func (e envelopeEditor) signed(edit func(m map[string]any)) string {
	e.t.Helper()
	m := e.tree()
	edit(m)
	signCheckout(e.t, m, e.key, checkoutMerchantKID)
	return string(checkoutBody(e.t, m))
}

// unsigned is the base changed by edit, its ap2 as edit left it.
func (e envelopeEditor) unsigned(edit func(m map[string]any)) string {
	e.t.Helper()
	m := e.tree()
	edit(m)
	return string(checkoutBody(e.t, m))
}

func obj(v any, name string) map[string]any { return v.(map[string]any)[name].(map[string]any) }

func lineItem(m map[string]any) map[string]any { return m["line_items"].([]any)[0].(map[string]any) }

// envelopeRefusals are bad bodies of POST /v1/ucp/checkout/authorize, each
// refused with a 400 before any evaluation.
func envelopeRefusals(t testing.TB, base []byte, key *ecdsa.PrivateKey) []envelopeRefusal {
	e := envelopeEditor{t: t, base: base, key: key}
	const (
		invalid  = "UCP_ENVELOPE_INVALID"
		version  = "UCP_VERSION_UNSUPPORTED"
		terms    = "UCP_MERCHANT_AUTHORIZATION_INVALID"
		mandate  = "UCP_MANDATE_INVALID"
		anywhere = "-"
	)
	b := string(base)
	var out []envelopeRefusal
	add := func(cat, name, body, code, pointer string) {
		out = append(out, envelopeRefusal{cat, name, body, code, pointer})
	}

	// The bytes: one strict JSON object.
	add(catMalformed, "empty body", "", invalid, "")
	add(catMalformed, "whitespace only", " \n\t", invalid, anywhere)
	for _, m := range []string{`{"a":`, `hello`, b[:len(b)-1], `{'a':1}`, `{"a":1,}`, `{"ucp":{"version":"2026-08-25"},}`, `/*c*/{}`} {
		add(catMalformed, shorten(m), m, invalid, anywhere)
	}
	add(catMalformed, "byte order mark", "\xef\xbb\xbf"+b, invalid, anywhere)
	add(catMalformed, "UTF-16", "\xff\xfe{\x00}\x00", invalid, anywhere)
	for _, m := range []string{`null`, `[]`, `[` + b + `]`, `"x"`, `5`, `true`, `{}`} {
		add(catNonObject, m[:min(len(m), 12)], m, invalid, map[bool]string{true: "/ucp", false: ""}[m == `{}`])
	}
	for _, tail := range []string{"x", " {}", b, ",", "]", "\x00", "null"} {
		add(catTrailing, "followed by "+strconv.Quote(shorten(tail)), b+tail, invalid, "")
	}
	// Invalid UTF-8, raw and escaped, in a value the schema leaves open,
	// in a governed one and in a member name.
	for _, u := range []string{"\xff", "\xc0\xaf", "\xed\xa0\x80", `\ud800`} {
		add(catUTF8, "buyer.first_name "+strconv.Quote(u), strings.Replace(b, `"Jane"`, `"Ja`+u+`ne"`, 1), invalid, "/buyer/first_name")
		add(catUTF8, "line item title "+strconv.Quote(u), strings.Replace(b, `"Red T-Shirt"`, `"Red`+u+`"`, 1), invalid, "/line_items/0/item/title")
	}
	add(catUTF8, "member name", "{\"\xc3\x28\":1,"+b[1:], invalid, anywhere)
	// Duplicate members: at the root (the same value or another), escaped,
	// and nested, in governed and in open members.
	add(catDuplicate, "id twice at the root, another value", `{"id":"chk_other",`+b[1:], invalid, "/id")
	add(catDuplicate, "ucp twice at the root", strings.Replace(b, `{"ap2":`, `{"ucp":{"version":"2026-08-25"},"ap2":`, 1), invalid, "/ucp")
	add(catDuplicate, "id twice, once escaped", `{"\u0069d":"chk_other",`+b[1:], invalid, "/id")
	add(catDuplicate, "a capability's version twice", strings.Replace(b, `"version":"2026-08-25"`, `"version":"2026-08-25","version":"2026-04-08"`, 1), invalid,
		"/ucp/capabilities/dev.ucp.shopping.checkout/0/version")
	add(catDuplicate, "price twice in a line item", strings.Replace(b, `"price":2500`, `"price":2500,"price":1`, 1), invalid, "/line_items/0/item/price")
	add(catDuplicate, "email twice in buyer", strings.Replace(b, `"email":"jane@example.com"`, `"email":"jane@example.com","email":"x@example.com"`, 1), invalid, "/buyer/email")
	add(catDuplicate, "merchant_authorization twice", strings.Replace(b, `"ap2":{`, `"ap2":{"merchant_authorization":"x..y",`, 1), invalid, "/ap2/merchant_authorization")
	// Depth and the JSON limits, inside a member the schema leaves open.
	// A grant keeps the checkout one level deeper, where a claim must read
	// it back: 64 levels is one too many.
	add(catDepth, "64 levels deep", strings.Replace(b, `{"ap2":`, `{"x_deep":`+strings.Repeat("[", 63)+strings.Repeat("]", 63)+`,"ap2":`, 1), invalid, "-")
	add(catDepth, "65 nested arrays in an open member", strings.Replace(b, `{"ap2":`, `{"x_deep":`+strings.Repeat("[", 65)+strings.Repeat("]", 65)+`,"ap2":`, 1), invalid, anywhere)
	var many strings.Builder
	for i := range 1001 {
		if i > 0 {
			many.WriteByte(',')
		}
		fmt.Fprintf(&many, `"m%d":0`, i)
	}
	add(catLimits, "1,001 members in an open member", strings.Replace(b, `{"ap2":`, `{"x_many":{`+many.String()+`},"ap2":`, 1), invalid, anywhere)
	add(catLimits, "10,001 elements in an open member", strings.Replace(b, `{"ap2":`, `{"x_many":[`+strings.TrimSuffix(strings.Repeat("0,", 10001), ",")+`],"ap2":`, 1), invalid, anywhere)
	add(catLimits, "NUL in buyer.first_name", strings.Replace(b, `"Jane"`, `"Ja\u0000ne"`, 1), invalid, anywhere)
	add(catLimits, "NUL in a member name", strings.Replace(b, `{"ap2":`, `{"x\u0000":1,"ap2":`, 1), invalid, anywhere)
	for _, n := range []string{`1e999`, `-1e999`, `1` + strings.Repeat("0", 70), `1e-999999`} {
		add(catAmount, "number "+shorten(n)+" in an open member", strings.Replace(b, `{"ap2":`, `{"x_number":`+n+`,"ap2":`, 1), invalid, "/x_number")
	}

	// The release: named exactly, and supported.
	for _, v := range []string{"2026-01-01", "2025-12-31", "2026-08-25 ", " 2026-08-25", "2026-8-25", "v2026-08-25", "2026-08-25T00:00:00Z", "", "2026\u201108\u201125"} {
		v := v
		add(catValue, "ucp.version "+strconv.Quote(v), e.signed(func(m map[string]any) { obj(m, "ucp")["version"] = v }), version, "/ucp/version")
	}
	for _, v := range []any{json.Number("20260825"), nil, []any{"2026-08-25"}, map[string]any{}} {
		v := v
		add(catWrongType, fmt.Sprintf("ucp.version %v", v), e.signed(func(m map[string]any) { obj(m, "ucp")["version"] = v }), invalid, "/ucp/version")
	}
	add(catValue, "no ucp.version", e.signed(func(m map[string]any) { delete(obj(m, "ucp"), "version") }), invalid, "/ucp/version")
	add(catWrongType, "ucp a string", e.signed(func(m map[string]any) { m["ucp"] = "2026-08-25" }), invalid, "/ucp")
	add(catValue, "a 2026-08-25 envelope without ucp.payment_handlers",
		e.signed(func(m map[string]any) { delete(obj(m, "ucp"), "payment_handlers") }), invalid, "/ucp/payment_handlers")
	add(catValue, "two payment handlers with one id", e.signed(func(m map[string]any) {
		h := obj(m, "ucp")["payment_handlers"].(map[string]any)
		h["com.example.pay"] = h["com.shopify.shop_pay"]
	}), invalid, anywhere)

	// Required members, each missing.
	for _, member := range []string{"ucp", "id", "line_items", "status", "currency", "totals", "links"} {
		add(catValue, "no "+member, e.signed(func(m map[string]any) { delete(m, member) }), invalid, "/"+member)
	}
	add(catValue, "no line item id", e.signed(func(m map[string]any) { delete(lineItem(m), "id") }), invalid, "/line_items/0/id")
	add(catValue, "no item price", e.signed(func(m map[string]any) { delete(obj(lineItem(m), "item"), "price") }), invalid, "/line_items/0/item/price")

	// Integers written as integers, within their ranges.
	const quantity, price, total = "/line_items/0/quantity", "/line_items/0/item/price", "/totals/2/amount"
	for _, c := range []struct {
		name, pointer string
		edit          func(m map[string]any)
	}{
		{"quantity 0", quantity, func(m map[string]any) { lineItem(m)["quantity"] = json.Number("0") }},
		{"quantity -1", quantity, func(m map[string]any) { lineItem(m)["quantity"] = json.Number("-1") }},
		{"quantity 2.0", quantity, func(m map[string]any) { lineItem(m)["quantity"] = json.Number("2.0") }},
		{"quantity 2e0", quantity, func(m map[string]any) { lineItem(m)["quantity"] = json.Number("2e0") }},
		{"quantity \"2\"", quantity, func(m map[string]any) { lineItem(m)["quantity"] = "2" }},
		{"price 2500.0", price, func(m map[string]any) { obj(lineItem(m), "item")["price"] = json.Number("2500.0") }},
		{"price 2.5e3", price, func(m map[string]any) { obj(lineItem(m), "item")["price"] = json.Number("2.5e3") }},
		{"price 2^53", price, func(m map[string]any) { obj(lineItem(m), "item")["price"] = json.Number("9007199254740992") }},
		{"price null", price, func(m map[string]any) { obj(lineItem(m), "item")["price"] = nil }},
		{"total 5400.5", total, func(m map[string]any) { m["totals"].([]any)[2].(map[string]any)["amount"] = json.Number("5400.5") }},
		{"total \"5400\"", total, func(m map[string]any) { m["totals"].([]any)[2].(map[string]any)["amount"] = "5400" }},
	} {
		add(catAmount, c.name, e.signed(c.edit), invalid, c.pointer)
	}
	// Totals: exactly one subtotal and one total.
	for _, c := range []struct {
		name   string
		totals []any
	}{
		{"two totals of type total", []any{map[string]any{"type": "subtotal", "amount": 5000}, map[string]any{"type": "total", "amount": 5000},
			map[string]any{"type": "total", "amount": 5000}}},
		{"no total", []any{map[string]any{"type": "subtotal", "amount": 5000}}},
		{"no subtotal", []any{map[string]any{"type": "total", "amount": 5000}}},
		{"two subtotals", []any{map[string]any{"type": "subtotal", "amount": 5000}, map[string]any{"type": "subtotal", "amount": 5000},
			map[string]any{"type": "total", "amount": 5000}}},
		{"no totals", []any{}},
	} {
		add(catValue, c.name, e.signed(func(m map[string]any) { m["totals"] = c.totals }), invalid, "/totals")
	}
	// The currency the amount is read in.
	for _, cur := range []string{"usd", "US", "USDX", "ZZZ", ""} {
		add(catValue, "currency "+strconv.Quote(cur), e.signed(func(m map[string]any) { m["currency"] = cur }), invalid, "/currency")
	}

	// The merchant's terms: a detached JWS of an understood form, whose
	// signature verifies with the org's key.
	withTerms := func(v any) string {
		return e.unsigned(func(m map[string]any) { m["ap2"] = map[string]any{"merchant_authorization": v} })
	}
	good := obj(e.tree(), "ap2")["merchant_authorization"].(string)
	header, sig, _ := strings.Cut(good, "..")
	hdr := func(h string) string { return b64([]byte(h)) + ".." + sig }
	for _, c := range []struct {
		name string
		v    any
	}{
		{"a number", 5}, {"null", nil}, {"an object", map[string]any{}}, {"empty", ""}, {"not a JWS", "abc"},
		{"attached payload", header + "." + b64([]byte("{}")) + "." + sig}, {"two dots only", ".."}, {"four segments", good + ".x"},
		{"header not base64url", "!!!.." + sig}, {"header padded", header + "=.." + sig}, {"header not JSON", b64([]byte("alg")) + ".." + sig},
		{"header an array", hdr(`["ES256"]`)}, {"alg none", hdr(`{"alg":"none","kid":"` + checkoutMerchantKID + `"}`)},
		{"alg HS256", hdr(`{"alg":"HS256","kid":"` + checkoutMerchantKID + `"}`)}, {"alg EdDSA", hdr(`{"alg":"EdDSA","kid":"` + checkoutMerchantKID + `"}`)},
		{"alg es256", hdr(`{"alg":"es256","kid":"` + checkoutMerchantKID + `"}`)}, {"no kid", hdr(`{"alg":"ES256"}`)},
		{"empty kid", hdr(`{"alg":"ES256","kid":""}`)}, {"kid a number", hdr(`{"alg":"ES256","kid":5}`)},
		{"crit", hdr(`{"alg":"ES256","kid":"` + checkoutMerchantKID + `","crit":["b64"],"b64":false}`)},
		{"b64 false", hdr(`{"alg":"ES256","kid":"` + checkoutMerchantKID + `","b64":false}`)},
		{"duplicate alg in the header", hdr(`{"alg":"ES384","alg":"ES256","kid":"` + checkoutMerchantKID + `"}`)},
		{"ES384 on a P-256 key", b64([]byte(`{"alg":"ES384","kid":"`+checkoutMerchantKID+`"}`)) + ".." + b64(make([]byte, 96))},
		{"signature not base64url", header + "..!!!"}, {"signature one byte short", header + ".." + sig[:len(sig)-2]},
		{"signature of ES384 length", header + ".." + b64(make([]byte, 96))}, {"zero signature", header + ".." + b64(make([]byte, 64))},
	} {
		add(catSigned, "merchant_authorization "+c.name, withTerms(c.v), terms, "/ap2/merchant_authorization")
	}
	add(catSigned, "tampered after signing", e.unsigned(func(m map[string]any) {
		m["totals"].([]any)[2].(map[string]any)["amount"] = json.Number("1")
	}), terms, "/ap2/merchant_authorization")
	add(catSigned, "signed with another key under the org's kid", e.unsigned(func(m map[string]any) {
		signCheckout(t, m, newMerchantKey(t, elliptic.P256()), checkoutMerchantKID)
	}), terms, "/ap2/merchant_authorization")
	add(catSigned, "ES256 under the kid of a P-384 key", e.unsigned(func(m map[string]any) {
		signCheckout(t, m, newMerchantKey(t, elliptic.P256()), checkoutSpareKID)
	}), terms, "/ap2/merchant_authorization")
	add(catWrongType, "ap2 a string", e.unsigned(func(m map[string]any) { m["ap2"] = "x" }), invalid, "/ap2")
	// The checkout mandate: an SD-JWT+kb bound to this checkout, beside
	// terms that verify.
	for _, c := range []struct {
		name string
		v    any
	}{{"a number", 5}, {"empty", ""}, {"not an SD-JWT", "abc"}, {"a JWT without disclosures", "a.b.c"}, {"an SD-JWT without key binding", "a.b.c~"}} {
		v := c.v
		add(catSigned, "checkout_mandate "+c.name, e.unsigned(func(m map[string]any) {
			signCheckout(t, m, key, checkoutMerchantKID)
			obj(m, "ap2")["checkout_mandate"] = v
		}), mandate, "/ap2/checkout_mandate")
	}
	return out
}

// checkoutSpecs are the bad-input specs of the UCP routes: the checkout
// authority, whose body is a UCP envelope the engine validates (so
// envelopeCases replace the strict-JSON battery), and the merchant key
// registry, which is the provider keys' with EC keys.
func (s *badSuite) checkoutSpecs(a checkoutArgs) map[string]routeSpec {
	t, x := s.t, s.x
	m := ucpCheckout(t, "chk_badinput_1", 2, 2500)
	signCheckout(t, m, a.merchant, checkoutMerchantKID)
	base := checkoutBody(t, m)

	authorize := routeSpec{org: orgQuery, body: string(base), idem: true, corr: true,
		envelope: func(q req) []badCase {
			var out []badCase
			for _, r := range envelopeRefusals(t, base, a.merchant) {
				c := s.variant(q, r.category, r.name, r.body, r.code)
				c.status = http.StatusBadRequest
				out = append(out, c)
			}
			// What the server refuses before the engine reads the body.
			pad := func(size int) string { return string(base[:len(base)-1]) + strings.Repeat(" ", size-len(base)) + "}" }
			c := s.variant(q, catOversize, "1 MiB + 1 byte", pad(server.DefaultMaxBodyBytes+1), "BODY_TOO_LARGE")
			c.status = http.StatusRequestEntityTooLarge
			out = append(out, c)
			c.name, c.chunked = "1 MiB + 1 byte, chunked", true
			out = append(out, c)
			for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/xml", "text/json", "json;;;", "*/*"} {
				c := s.variant(q, catMedia, ct, q.body, "UNSUPPORTED_MEDIA_TYPE").with("Content-Type", ct)
				c.status = http.StatusUnsupportedMediaType
				out = append(out, c)
			}
			headerValues := []string{"a\tb", "a b", "\xff", "\xc3\x28", "a\u0085b", "\u009b2J", strings.Repeat("k", 256)}
			for _, h := range []struct{ name, code string }{{server.HeaderIdempotencyKey, "INVALID_IDEMPOTENCY_KEY"},
				{server.HeaderCorrelationID, "INVALID_CORRELATION_ID"}} {
				for _, v := range headerValues {
					c := s.variant(q, catHeader, h.name+" "+strconv.Quote(shorten(v)), q.body, h.code).with(h.name, v)
					c.status = http.StatusBadRequest
					out = append(out, c)
				}
				for _, v := range badTokenHeaders {
					c := s.variant(q, catHeader, h.name+" "+v.name, q.body, h.code)
					c.rawHeaders, c.status = http.Header{h.name: v.vs}, http.StatusBadRequest
					out = append(out, c)
				}
			}
			// A bad header and a bad body: the header is judged first.
			c = s.variant(q, catHeader, "bad Idempotency-Key, empty body", "", "INVALID_IDEMPOTENCY_KEY").with(server.HeaderIdempotencyKey, "a b")
			c.status = http.StatusBadRequest
			return append(out, c)
		}}

	// The merchant key registry.
	k := newMerchantKey(t, elliptic.P256())
	jwk := jwkJSON(merchantJWK(k))
	body := `{"kid":` + lit(checkoutNewKID) + `,"public_jwk":` + jwk + `}`
	withJWK := func(edit func(m map[string]any)) string {
		j := merchantJWK(k)
		edit(j)
		return `{"kid":"k-1","public_jwk":` + jwkJSON(j) + `}`
	}
	p521 := merchantJWK(newMerchantKey(t, elliptic.P521()))
	register := routeSpec{org: orgQuery, body: body, openUnknown: []string{"public_jwk"},
		idents:  []string{`{"kid":@@,"public_jwk":` + jwk + `}`, `{"kid":"k-1","iss":@@,"public_jwk":` + jwk + `}`},
		grammar: []string{`{"kid":@@,"public_jwk":` + jwk + `}`},
		extra: func(q req) []badCase {
			var out []badCase
			add := func(cat, name, body string, status int, code string) {
				c := s.variant(q, cat, name, body, code)
				c.status = status
				out = append(out, c)
			}
			for _, name := range []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"} {
				add(catValue, "private member "+name, withJWK(func(m map[string]any) { m[name] = b64(make([]byte, 32)) }),
					http.StatusBadRequest, "PRIVATE_KEY_MATERIAL")
			}
			add(catValue, "the private key", withJWK(func(m map[string]any) { m["d"] = b64(k.D.FillBytes(make([]byte, 32))) }),
				http.StatusBadRequest, "PRIVATE_KEY_MATERIAL")
			for _, c := range []struct {
				name string
				body string
			}{
				{"RSA JWK", `{"kid":"k-1","public_jwk":{"kty":"RSA","n":` + lit(b64(bytes.Repeat([]byte{0xc5}, 256))) + `,"e":"AQAB"}}`},
				{"OKP Ed25519 JWK", `{"kid":"k-1","public_jwk":` + jwkJSON(bareJWK(mustKey(t, 64))) + `}`},
				{"OKP X25519 JWK", `{"kid":"k-1","public_jwk":{"kty":"OKP","crv":"X25519","x":` + lit(b64(make([]byte, 32))) + `}}`},
				{"oct JWK", `{"kid":"k-1","public_jwk":{"kty":"oct"}}`},
				{"P-521", `{"kid":"k-1","public_jwk":` + jwkJSON(p521) + `}`},
				{"P-521 coordinates as P-256", withJWK(func(m map[string]any) { m["x"], m["y"] = p521["x"], p521["y"] })},
				{"secp256k1", withJWK(func(m map[string]any) { m["crv"] = "secp256k1" })},
				{"crv p-256", withJWK(func(m map[string]any) { m["crv"] = "p-256" })},
				{"kty ec", withJWK(func(m map[string]any) { m["kty"] = "ec" })},
				{"off-curve point", withJWK(func(m map[string]any) { m["y"] = m["x"] })},
				{"the point at infinity", withJWK(func(m map[string]any) { m["x"], m["y"] = b64(make([]byte, 32)), b64(make([]byte, 32)) })},
				{"x of 31 bytes", withJWK(func(m map[string]any) { m["x"] = b64(make([]byte, 31)) })},
				{"y of 33 bytes", withJWK(func(m map[string]any) { m["y"] = b64(make([]byte, 33)) })},
				{"x padded", withJWK(func(m map[string]any) { m["x"] = m["x"].(string) + "=" })},
				{"x standard base64", withJWK(func(m map[string]any) {
					m["x"] = strings.NewReplacer("-", "+", "_", "/").Replace(m["x"].(string)) + "+"
				})},
				{"no y", withJWK(func(m map[string]any) { delete(m, "y") })},
				{"no kty", withJWK(func(m map[string]any) { delete(m, "kty") })},
				{"alg ES384 on P-256", withJWK(func(m map[string]any) { m["alg"] = "ES384" })},
				{"alg EdDSA", withJWK(func(m map[string]any) { m["alg"] = "EdDSA" })},
				{"use enc", withJWK(func(m map[string]any) { m["use"] = "enc" })},
				{"key_ops sign", withJWK(func(m map[string]any) { m["key_ops"] = []any{"verify", "sign"} })},
				{"key_ops a string", withJWK(func(m map[string]any) { m["key_ops"] = "verify" })},
				{"empty kid inside", withJWK(func(m map[string]any) { m["kid"] = "" })},
				{"an empty JWK", `{"kid":"k-1","public_jwk":{}}`},
				{"a string JWK", `{"kid":"k-1","public_jwk":"x"}`},
				{"an array JWK", `{"kid":"k-1","public_jwk":[` + jwk + `]}`},
				{"a null JWK", `{"kid":"k-1","public_jwk":null}`},
				{"no JWK", `{"kid":"k-1"}`},
			} {
				add(catValue, c.name, c.body, http.StatusBadRequest, "INVALID_PUBLIC_KEY")
			}
			add(catValue, "another kid inside the JWK", withJWK(func(m map[string]any) { m["kid"] = "other" }), http.StatusBadRequest, "KID_MISMATCH")
			for _, kid := range []string{strings.Repeat("k", 201), "with space", "", " k", "k\u200b", "cl\u00e9"} {
				add(catIdent, "kid "+strconv.Quote(shorten(kid)), `{"kid":`+lit(kid)+`,"public_jwk":`+jwk+`}`, http.StatusBadRequest, "INVALID_KID")
			}
			add(catValue, "no kid", `{"public_jwk":`+jwk+`}`, http.StatusBadRequest, "INVALID_KID")
			add(catValue, "iss of 513 bytes", `{"kid":"k-1","iss":`+lit(strings.Repeat("i", 513))+`,"public_jwk":`+jwk+`}`,
				http.StatusBadRequest, "INVALID_REQUEST")
			for _, m := range []string{`"kind":"merchant"`, `"status":"ACTIVE"`, `"org_id":` + lit(s.a.ID), `"public_key":"AA=="`, `"alg":"ES256"`} {
				add(catUnknown, "member "+m, `{"kid":"k-1","public_jwk":`+jwk+`,`+m+`}`, http.StatusBadRequest, "UNKNOWN_MEMBER")
			}
			for _, c := range []string{`{"kid":5,"public_jwk":` + jwk + `}`, `{"kid":["k-1"],"public_jwk":` + jwk + `}`,
				`{"kid":"k-1","iss":5,"public_jwk":` + jwk + `}`, `{"kid":"k-1","iss":{},"public_jwk":` + jwk + `}`} {
				add(catWrongType, shorten(c), c, http.StatusBadRequest, "WRONG_TYPE")
			}
			// A live kid with another key, the spare's or org b's kid: never
			// replaced in place (org b's is another registry, so it is free
			// for org a only with org a's own key).
			add(catValue, "org a's live kid with another key", `{"kid":`+lit(a.spare)+`,"public_jwk":`+jwk+`}`, http.StatusConflict, "KID_IN_USE")
			add(catValue, "org a's merchant kid with another key", `{"kid":`+lit(checkoutMerchantKID)+`,"public_jwk":`+jwk+`}`,
				http.StatusConflict, "KID_IN_USE")
			return out
		}}
	list := routeSpec{org: orgQuery}
	revoke := routeSpec{org: orgQuery, params: map[string]string{"kid": a.spare}, paramCodes: []string{"KEY_NOT_FOUND", "INVALID_KID"},
		extra: func(q req) []badCase {
			var out []badCase
			for _, kid := range []string{strings.Repeat("k", 201), a.spare + "%E2%80%8B", "%E2%80%AE" + a.spare, a.spare + "%20", "cl%C3%A9", "with%20space"} {
				p := q
				p.path = strings.Replace(q.path, a.spare, kid, 1)
				c := s.variant(p, catPath, "kid "+shorten(kid), "", "INVALID_KID")
				c.status = http.StatusBadRequest
				out = append(out, c)
			}
			// Kids that name nothing in org a's merchant registry: another
			// case, org b's merchant key, org a's agent and provider keys.
			for _, c := range []struct{ name, kid string }{
				{"the kid in upper case", strings.ToUpper(a.spare)}, {"org b's merchant kid", a.foreign},
				{"org a's agent kid", x.agent.KID()}, {"org a's provider kid", x.provider.KID()}, {"a kid never registered", "never-registered"},
			} {
				p := q
				p.path = strings.Replace(q.path, a.spare, c.kid, 1)
				v := s.variant(p, catForeign, c.name, "", "KEY_NOT_FOUND")
				v.status = http.StatusNotFound
				out = append(out, v)
			}
			// Org b's key on org b's own merchant kid, named with org a.
			p := q
			p.path, p.key, p.query = strings.Replace(q.path, a.spare, a.foreign, 1), s.b.Key, "?org_id="+s.a.ID
			v := s.variant(p, catForeign, "org b's key naming org a", "", "ORG_MISMATCH")
			v.status = http.StatusForbidden
			return append(out, v)
		}}
	return map[string]routeSpec{
		"POST /v1/ucp/checkout/authorize":   authorize,
		"POST /v1/ucp/signing-keys":         register,
		"GET /v1/ucp/signing-keys":          list,
		"DELETE /v1/ucp/signing-keys/{kid}": revoke,
	}
}

// TestBadInputOnCheckoutRoutes runs the UCP routes' specs in an env of
// their own (TestBadInputOnEveryRoute takes them with every other
// route's): every case is refused with its code, nothing is written, and
// each accepted request is accepted afterwards.
func TestBadInputOnCheckoutRoutes(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	s := &badSuite{t: t, x: x, a: x.o, scoped: map[string]string{},
		byCategory: map[string]int{}, byCode: map[string]int{}, byRoute: map[string]int{}}
	s.b = x.createOrg("Foreign")
	for _, sc := range tenant.AllScopes {
		if sc != tenant.ScopeOrgAll {
			s.scoped[string(sc)] = x.createKey(s.a, string(sc))
		}
	}
	specs := s.checkoutSpecs(s.checkoutTargets())

	served := map[string][]string{}
	var table []tableRoute
	for _, r := range readRouteTable(t) {
		served[r.path] = append(served[r.path], r.method)
		if _, ok := specs[r.pattern]; ok {
			table = append(table, r)
		}
	}
	if len(table) != len(specs) {
		t.Fatalf("routes.go serves %d of the %d routes specified", len(table), len(specs))
	}
	merchantKeys := func() map[string]string {
		out := map[string]string{}
		for _, o := range []org{s.a, s.b} {
			out[o.ID] = string(x.req(t, "GET", pathMerchantKeys, o.Key, nil, nil).want(t, http.StatusOK).Raw)
		}
		return out
	}
	keysBefore := merchantKeys()
	fpBefore := x.fingerprint(t)
	heads := s.heads(t)
	controls := make([]req, len(table))
	for i, r := range table {
		spec := specs[r.pattern]
		q := s.accepted(r, spec)
		controls[i] = q
		cases := s.cases(r, spec, q, served[r.path])
		if len(cases) == 0 {
			t.Errorf("route %q: no bad-input cases were generated", r.pattern)
		}
		t.Run(r.pattern, func(t *testing.T) {
			for _, c := range cases {
				res := s.send(t, c)
				s.check(t, r, c, res)
				if now := s.heads(t); now != heads {
					t.Errorf("%s / %s: the request changed the ledger head %v -> %v: %s", c.category, c.name, heads, now, res)
					heads = now
				}
			}
		})
	}
	if d := cmp.Diff(keysBefore, merchantKeys()); d != "" {
		t.Errorf("bad input changed the merchant keys (-before +after):\n%s", d)
	}
	if fp := x.fingerprint(t); fp != fpBefore {
		t.Errorf("bad input changed the store: %s", cmp.Diff(fpBefore, fp))
	}
	for i, r := range table {
		q := controls[i]
		var body any
		if q.body != "" {
			body = q.body
		}
		if res := x.req(t, q.method, q.url(), q.key, body, q.headers); res.Status < 200 || res.Status > 299 {
			t.Errorf("%s: the accepted request is refused: %s", r.pattern, res)
		}
	}
	x.ledgerOK(t)

	total := 0
	for _, n := range s.byCategory {
		total += n
	}
	t.Logf("bad-input totals: routes covered %d of %d, bad inputs tried %d, 5xx seen %d, authorizations %d",
		len(s.byRoute), len(table), total, s.fiveXX, s.authorized)
	codes := make([]string, 0, len(s.byCode))
	for c, n := range s.byCode {
		codes = append(codes, fmt.Sprintf("%s %d", c, n))
	}
	sort.Strings(codes)
	t.Logf("codes answered: %s", strings.Join(codes, ", "))
	if len(s.byRoute) != len(table) || s.fiveXX != 0 || s.authorized != 0 {
		t.Errorf("want every route covered, no 5xx and no authorization")
	}
}

// TestCheckoutEnvelopeRefusalsNamePointers: a refused envelope's problem
// names the failing location as an RFC 6901 pointer in errors[0].field.
func TestCheckoutEnvelopeRefusalsNamePointers(t *testing.T) {
	t.Parallel()
	x := newExecEnv(t, bandsBundle)
	k := newMerchantKey(t, elliptic.P256())
	x.registerMerchant(t, x.o.Key, checkoutMerchantKID, merchantJWK(k)).want(t, http.StatusCreated)
	x.registerMerchant(t, x.o.Key, checkoutSpareKID, merchantJWK(newMerchantKey(t, elliptic.P384()))).want(t, http.StatusCreated)
	m := ucpCheckout(t, "chk_pointers", 2, 2500)
	signCheckout(t, m, k, checkoutMerchantKID)
	head := x.head(x.o.Key)
	for _, r := range envelopeRefusals(t, checkoutBody(t, m), k) {
		res := x.authorizeCheckout(t, x.o.Key, []byte(r.body), nil)
		if res.Status != http.StatusBadRequest || res.str("code") != r.code {
			t.Errorf("%s: want 400 %s: %s", r.name, r.code, shorten(res.String()))
			continue
		}
		field, ok := lookup(res.JSON, "errors.0.field").(string)
		switch {
		case !ok:
			t.Errorf("%s: no errors[0].field: %s", r.name, shorten(res.String()))
		case field != "" && !strings.HasPrefix(field, "/"):
			t.Errorf("%s: errors[0].field %q is not a JSON pointer", r.name, field)
		case r.pointer != "-" && field != r.pointer:
			t.Errorf("%s: errors[0].field %q, want %q", r.name, field, r.pointer)
		}
	}
	x.wantNoWrite(t, x.o.Key, head, "refused envelopes")
}
