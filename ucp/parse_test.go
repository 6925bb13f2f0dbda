package ucp

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clearancehq/clearance/internal/canon"
	"github.com/google/go-cmp/cmp"
)

// TestOfficialExamples: every official example parses to the expected
// summary, and its digest is the SHA-256 of its RFC 8785 form (digests
// cross-checked with an independent JCS implementation).
func TestOfficialExamples(t *testing.T) {
	lineItems := []LineItem{{ID: "li_1", ItemID: "item_123", Title: "Red T-Shirt", Price: 2500, Quantity: 2,
		Subtotal: 5000, Total: 5000, Totals: []Total{{"subtotal", 5000}, {"total", 5000}}}}
	totals := []Total{{"subtotal", 5000}, {"tax", 400}, {"total", 5400}}
	for _, c := range []struct {
		file, id, status, digest string
		release                  Release
		handlers                 []PaymentHandler
	}{
		{"2026-04-08/checkout-response-2026-04-08-completed.json", "chk_123456789", "completed",
			"sha256:2aa55c8f2374a4b445ee0876841611da7cac1e4772f697b7fd28ea79258f221d", Release20260408,
			[]PaymentHandler{{"com.google.pay", "gpay_1234", "2026-04-08"}}},
		{"2026-04-08/checkout-response-2026-04-08-ready-for-complete.json", "chk_1234567890", "ready_for_complete",
			"sha256:383ae89887207ea21357817828bcf4ee186b86623a8565f949704cdc0b4701fe", Release20260408,
			[]PaymentHandler{{"com.shopify.shop_pay", "shop_pay_1234", "2026-04-08"}}},
		{"2026-08-25/checkout-response-2026-08-25-ready-for-complete.json", "chk_1234567890", "ready_for_complete",
			"sha256:9d370d8624cfc204fb4da253a210505240cf6d245ce7644f8ed227d3e0933944", Release20260825,
			[]PaymentHandler{{"com.shopify.shop_pay", "shop_pay_1234", "2026-08-25"}}},
	} {
		t.Run(c.file, func(t *testing.T) {
			got, err := Parse(readFile(t, filepath.Join("testdata", c.file)))
			if err != nil {
				t.Fatal(err)
			}
			want := &Checkout{Release: c.release, ID: c.id, Status: c.status, Currency: "USD",
				LineItems: lineItems, Totals: totals, Subtotal: 5000, Total: 5400,
				PaymentHandlers: c.handlers, Digest: c.digest}
			if diff := cmp.Diff(want, got, cmpIgnoreCanonical); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			if canon.Digest(got.Canonical) != c.digest {
				t.Errorf("Digest is not the digest of Canonical")
			}
		})
	}
}

var cmpIgnoreCanonical = cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "Canonical" }, cmp.Ignore())

// TestEveryFixtureParses covers the generated ap2 fixtures as well.
func TestEveryFixtureParses(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	if err != nil || len(files) < 7 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	for _, f := range files {
		c, err := Parse(readFile(t, f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if string(c.Release) != filepath.Base(filepath.Dir(f)) {
			t.Errorf("%s: release %s", f, c.Release)
		}
		if strings.Contains(f, "-ap2") && (c.Terms == nil || c.Terms.KID != merchantKID || c.Terms.Alg != "ES256") {
			t.Errorf("%s: terms %+v", f, c.Terms)
		}
	}
}

// envelopeCase is one body and the refusal it must get ("" code: accepted).
type envelopeCase struct {
	name    string
	body    func(t *testing.T, base []byte) []byte
	code    string
	pointer string
}

func set(path []string, v any) func(t *testing.T, base []byte) []byte {
	return func(t *testing.T, base []byte) []byte {
		return mutate(t, base, func(m map[string]any) {
			last := path[len(path)-1]
			switch parent := at(m, path[:len(path)-1]...).(type) {
			case map[string]any:
				parent[last] = v
			case []any:
				parent[int(last[0]-'0')] = v
			}
		})
	}
}

func del(path ...string) func(t *testing.T, base []byte) []byte {
	return func(t *testing.T, base []byte) []byte {
		return mutate(t, base, func(m map[string]any) {
			parent := m
			if len(path) > 1 {
				parent = obj(m, path[:len(path)-1]...)
			}
			delete(parent, path[len(path)-1])
		})
	}
}

func edit(f func(m map[string]any)) func(t *testing.T, base []byte) []byte {
	return func(t *testing.T, base []byte) []byte { return mutate(t, base, f) }
}

func raw(f func(base string) string) func(t *testing.T, base []byte) []byte {
	return func(t *testing.T, base []byte) []byte { return []byte(f(string(base))) }
}

func p(s string) []string { return strings.Split(s, ".") }

func n(lit string) json.Number { return json.Number(lit) }

// commonCases run against the official example of each release.
var commonCases = []envelopeCase{
	// the seven required members
	{"missing ucp", del("ucp"), CodeInvalidEnvelope, "/ucp"},
	{"missing id", del("id"), CodeInvalidEnvelope, "/id"},
	{"missing line_items", del("line_items"), CodeInvalidEnvelope, "/line_items"},
	{"missing status", del("status"), CodeInvalidEnvelope, "/status"},
	{"missing currency", del("currency"), CodeInvalidEnvelope, "/currency"},
	{"missing totals", del("totals"), CodeInvalidEnvelope, "/totals"},
	{"missing links", del("links"), CodeInvalidEnvelope, "/links"},
	// wrong types
	{"ucp an array", set(p("ucp"), []any{}), CodeInvalidEnvelope, "/ucp"},
	{"id a number", set(p("id"), n("5")), CodeInvalidEnvelope, "/id"},
	{"line_items an object", set(p("line_items"), map[string]any{}), CodeInvalidEnvelope, "/line_items"},
	{"status a number", set(p("status"), n("1")), CodeInvalidEnvelope, "/status"},
	{"currency null", set(p("currency"), nil), CodeInvalidEnvelope, "/currency"},
	{"totals a string", set(p("totals"), "5400"), CodeInvalidEnvelope, "/totals"},
	{"links an object", set(p("links"), map[string]any{}), CodeInvalidEnvelope, "/links"},
	{"line item a string", set(p("line_items"), []any{"li_1"}), CodeInvalidEnvelope, "/line_items/0"},
	{"payment_handlers an array", set(p("ucp.payment_handlers"), []any{}), CodeInvalidEnvelope, "/ucp/payment_handlers"},
	{"bad status", set(p("status"), "pending"), CodeInvalidEnvelope, "/status"},
	// ucp.version
	{"version 2026-04-09", set(p("ucp.version"), "2026-04-09"), CodeUnsupportedRelease, "/ucp/version"},
	{"version with a trailing space", set(p("ucp.version"), "2026-08-25 "), CodeUnsupportedRelease, "/ucp/version"},
	{"version empty", set(p("ucp.version"), ""), CodeUnsupportedRelease, "/ucp/version"},
	{"version an older release", set(p("ucp.version"), "2026-01-11"), CodeUnsupportedRelease, "/ucp/version"},
	{"version a number", set(p("ucp.version"), n("20260825")), CodeInvalidEnvelope, "/ucp/version"},
	{"version null", set(p("ucp.version"), nil), CodeInvalidEnvelope, "/ucp/version"},
	{"version missing", del("ucp", "version"), CodeInvalidEnvelope, "/ucp/version"},
	{"unsupported version wins over a missing id", edit(func(m map[string]any) {
		obj(m, "ucp")["version"] = "2027-01-01"
		delete(m, "id")
	}), CodeUnsupportedRelease, "/ucp/version"},
	// line items
	{"line item missing id", del(p("line_items.0.id")...), CodeInvalidEnvelope, "/line_items/0/id"},
	{"line item missing item", del(p("line_items.0.item")...), CodeInvalidEnvelope, "/line_items/0/item"},
	{"line item missing quantity", del(p("line_items.0.quantity")...), CodeInvalidEnvelope, "/line_items/0/quantity"},
	{"line item missing totals", del(p("line_items.0.totals")...), CodeInvalidEnvelope, "/line_items/0/totals"},
	{"item missing id", del(p("line_items.0.item.id")...), CodeInvalidEnvelope, "/line_items/0/item/id"},
	{"item missing title", del(p("line_items.0.item.title")...), CodeInvalidEnvelope, "/line_items/0/item/title"},
	{"item missing price", del(p("line_items.0.item.price")...), CodeInvalidEnvelope, "/line_items/0/item/price"},
	{"quantity 0", set(p("line_items.0.quantity"), n("0")), CodeInvalidEnvelope, "/line_items/0/quantity"},
	{"quantity -1", set(p("line_items.0.quantity"), n("-1")), CodeInvalidEnvelope, "/line_items/0/quantity"},
	{"quantity 1.5", set(p("line_items.0.quantity"), n("1.5")), CodeInvalidEnvelope, "/line_items/0/quantity"},
	{"quantity 2.0", set(p("line_items.0.quantity"), n("2.0")), CodeInvalidEnvelope, "/line_items/0/quantity"},
	{"quantity 1e0", set(p("line_items.0.quantity"), n("1e0")), CodeInvalidEnvelope, "/line_items/0/quantity"},
	{"quantity 2^53", set(p("line_items.0.quantity"), n("9007199254740992")), CodeInvalidEnvelope, "/line_items/0/quantity"},
	{"quantity a string", set(p("line_items.0.quantity"), "2"), CodeInvalidEnvelope, "/line_items/0/quantity"},
	{"price 2500.0", set(p("line_items.0.item.price"), n("2500.0")), CodeInvalidEnvelope, "/line_items/0/item/price"},
	{"price 25e2", set(p("line_items.0.item.price"), n("25e2")), CodeInvalidEnvelope, "/line_items/0/item/price"},
	{"price negative", set(p("line_items.0.item.price"), n("-1")), CodeInvalidEnvelope, "/line_items/0/item/price"},
	{"price beyond 2^53-1", set(p("line_items.0.item.price"), n("9007199254740993")), CodeInvalidEnvelope, "/line_items/0/item/price"},
	{"line item total amount 1.5", set(p("line_items.0.totals.0.amount"), n("1.5")), CodeInvalidEnvelope, "/line_items/0/totals/0/amount"},
	// totals
	{"two subtotals", set(p("totals"), []any{
		map[string]any{"type": "subtotal", "amount": n("5000")}, map[string]any{"type": "subtotal", "amount": n("0")},
		map[string]any{"type": "total", "amount": n("5000")}}), CodeInvalidEnvelope, "/totals"},
	{"no total", set(p("totals"), []any{map[string]any{"type": "subtotal", "amount": n("5000")}}), CodeInvalidEnvelope, "/totals"},
	{"two totals", set(p("totals"), []any{map[string]any{"type": "subtotal", "amount": n("5000")},
		map[string]any{"type": "total", "amount": n("5000")}, map[string]any{"type": "total", "amount": n("5000")}}), CodeInvalidEnvelope, "/totals"},
	{"no subtotal", set(p("totals"), []any{map[string]any{"type": "total", "amount": n("5000")}}), CodeInvalidEnvelope, "/totals"},
	{"empty totals", set(p("totals"), []any{}), CodeInvalidEnvelope, "/totals"},
	{"total amount 5400.0", set(p("totals.2.amount"), n("5400.0")), CodeInvalidEnvelope, "/totals/2/amount"},
	{"total missing amount", del(p("totals.0.amount")...), CodeInvalidEnvelope, "/totals/0/amount"},
	{"negative subtotal", set(p("totals.0.amount"), n("-5")), CodeInvalidEnvelope, "/totals/0/amount"},
	{"positive discount", set(p("totals.1"), map[string]any{"type": "discount", "amount": n("100")}), CodeInvalidEnvelope, "/totals/1/amount"},
	// payment handlers
	{"payment handler missing id", del("ucp", "payment_handlers", "com.shopify.shop_pay", "0", "id"), CodeInvalidEnvelope, "/ucp/payment_handlers/com.shopify.shop_pay/0/id"},
	{"payment handler id repeated", edit(func(m map[string]any) {
		h := obj(m, "ucp", "payment_handlers")
		h["com.example.pay"] = []any{map[string]any{"id": "shop_pay_1234", "version": "2026-04-08"}}
	}), CodeInvalidEnvelope, "/ucp/payment_handlers/com.shopify.shop_pay/0/id"},
	// bytes
	{"duplicate member at the root", raw(func(b string) string { return strings.Replace(b, "{", `{"id":"x",`, 1) }), CodeInvalidEnvelope, "/id"},
	{"duplicate member nested", raw(func(b string) string {
		return strings.Replace(b, `"title": "Red T-Shirt"`, `"title": "Red T-Shirt", "title": "Blue"`, 1)
	}), CodeInvalidEnvelope, "/line_items/0/item/title"},
	{"duplicate member in an extension", raw(func(b string) string {
		return strings.Replace(b, `"merchant_id": "shop_merchant_123"`, `"merchant_id": "a", "merchant_id": "b"`, 1)
	}), CodeInvalidEnvelope, "/ucp/payment_handlers/com.shopify.shop_pay/0/config/merchant_id"},
	{"string body", raw(func(string) string { return `"checkout"` }), CodeInvalidEnvelope, ""},
	{"array body", raw(func(b string) string { return "[" + b + "]" }), CodeInvalidEnvelope, ""},
	{"null body", raw(func(string) string { return "null" }), CodeInvalidEnvelope, ""},
	{"empty body", raw(func(string) string { return "" }), CodeInvalidEnvelope, ""},
	{"truncated body", raw(func(b string) string { return b[:strings.Index(b, `"version"`)] }), CodeInvalidEnvelope, "/ucp"},
	{"trailing object", raw(func(b string) string { return b + "{}" }), CodeInvalidEnvelope, ""},
	{"trailing garbage", raw(func(b string) string { return b + "x" }), CodeInvalidEnvelope, ""},
	{"invalid UTF-8", raw(func(b string) string { return strings.Replace(b, "Red T-Shirt", "Red \xff", 1) }), CodeInvalidEnvelope, "/line_items/0/item/title"},
	{"NUL in a string", raw(func(b string) string { return strings.Replace(b, "Red T-Shirt", `Red\u0000`, 1) }), CodeInvalidEnvelope, ""},
	{"nesting too deep", set(p("x_deep"), deep(70)), CodeInvalidEnvelope, ""},
	{"number beyond a double", set(p("x_ext"), map[string]any{"big": n("1e400")}), CodeInvalidEnvelope, "/x_ext/big"},
	{"number exponent too large", set(p("x_ext"), n("1e-999999")), CodeInvalidEnvelope, "/x_ext"},
	{"number literal too long", set(p("x_ext"), n("0."+strings.Repeat("1", 80))), CodeInvalidEnvelope, "/x_ext"},
	{"body too large", set(p("x_pad"), strings.Repeat("a", MaxEnvelopeBytes)), CodeInvalidEnvelope, ""},
	// ap2
	{"ap2 not an object", set(p("ap2"), "x"), CodeInvalidEnvelope, "/ap2"},
	{"merchant_authorization not a JWS", set(p("ap2"), map[string]any{"merchant_authorization": "abc"}), CodeInvalidTerms, "/ap2/merchant_authorization"},
	{"merchant_authorization a number", set(p("ap2"), map[string]any{"merchant_authorization": n("1")}), CodeInvalidTerms, "/ap2/merchant_authorization"},
	{"merchant_authorization with payload", set(p("ap2"), map[string]any{"merchant_authorization": jwsOf(`{"alg":"ES256","kid":"k"}`, "e30", 64)}), CodeInvalidTerms, "/ap2/merchant_authorization"},
	{"merchant_authorization alg HS256", set(p("ap2"), map[string]any{"merchant_authorization": jwsOf(`{"alg":"HS256","kid":"k"}`, "", 32)}), CodeInvalidTerms, "/ap2/merchant_authorization"},
	{"merchant_authorization alg none", set(p("ap2"), map[string]any{"merchant_authorization": jwsOf(`{"alg":"none","kid":"k"}`, "", 64)}), CodeInvalidTerms, "/ap2/merchant_authorization"},
	{"merchant_authorization without kid", set(p("ap2"), map[string]any{"merchant_authorization": jwsOf(`{"alg":"ES256"}`, "", 64)}), CodeInvalidTerms, "/ap2/merchant_authorization"},
	{"merchant_authorization header not an object", set(p("ap2"), map[string]any{"merchant_authorization": jwsOf(`["ES256"]`, "", 64)}), CodeInvalidTerms, "/ap2/merchant_authorization"},
	{"merchant_authorization header duplicate alg", set(p("ap2"), map[string]any{"merchant_authorization": jwsOf(`{"alg":"ES256","alg":"ES384","kid":"k"}`, "", 64)}), CodeInvalidTerms, "/ap2/merchant_authorization"},
	{"merchant_authorization with crit", set(p("ap2"), map[string]any{"merchant_authorization": jwsOf(`{"alg":"ES256","kid":"k","crit":["b64"],"b64":false}`, "", 64)}), CodeInvalidTerms, "/ap2/merchant_authorization"},
	{"merchant_authorization DER signature", set(p("ap2"), map[string]any{"merchant_authorization": jwsOf(`{"alg":"ES256","kid":"k"}`, "", 71)}), CodeInvalidTerms, "/ap2/merchant_authorization"},
	{"merchant_authorization padded base64", set(p("ap2"), map[string]any{"merchant_authorization": "eyJhbGciOiJFUzI1NiIsImtpZCI6ImsifQ==..AAAA"}), CodeInvalidTerms, "/ap2/merchant_authorization"},
	{"checkout_mandate a number", set(p("ap2"), map[string]any{"checkout_mandate": n("1")}), CodeInvalidMandate, "/ap2/checkout_mandate"},
	// accepted
	{"extension members kept", edit(func(m map[string]any) {
		m["x_loyalty"] = map[string]any{"points": n("12"), "tier": "gold"}
		obj(m, "ucp")["x_trace"] = "t-1"
		obj(m, "line_items", "0")["x_gift"] = true
	}), "", ""},
	{"floats in extension members", edit(func(m map[string]any) {
		m["x_rates"] = map[string]any{"fx": n("1.0825"), "weights": []any{n("2.0"), n("1e3"), n("-0.5")}, "big": n("12345678901234567890")}
		obj(m, "line_items", "0")["x_weight_kg"] = n("0.25")
		obj(m, "line_items", "0", "item")["x_rating"] = n("4.5")
	}), "", ""},
	{"floats in an unvalidated extension's totals", set(p("fulfillment.methods.0.groups.0.options.0.totals.0.amount"), n("500.5")), "", ""},
	{"discount entry", set(p("totals.1"), map[string]any{"type": "discount", "amount": n("-100")}), "", ""},
	{"no line items", set(p("line_items"), []any{}), "", ""},
	{"maximum exact amount", set(p("totals.2.amount"), n("9007199254740991")), "", ""},
}

func deep(n int) any {
	var v any = map[string]any{}
	for range n {
		v = []any{v}
	}
	return v
}

// jwsOf is a detached JWS with the given header JSON, payload segment and
// a zero signature of sigLen bytes.
func jwsOf(header, payload string, sigLen int) string {
	return b64.EncodeToString([]byte(header)) + "." + payload + "." + b64.EncodeToString(make([]byte, sigLen))
}

// releaseCases hold for one release only.
var releaseCases = map[Release][]envelopeCase{
	Release20260408: {
		{"no payment_handlers is fine", del("ucp", "payment_handlers"), "", ""},
		{"quantity beyond 2^53-1 (no schema maximum)", set(p("line_items.0.quantity"), n("9007199254740993")), CodeInvalidEnvelope, "/line_items/0/quantity"},
	},
	Release20260825: {
		{"no payment_handlers", del("ucp", "payment_handlers"), CodeInvalidEnvelope, "/ucp/payment_handlers"},
		{"bad map_order", set(p("ucp.map_order"), map[string]any{"payment_handlers": "x"}), CodeInvalidEnvelope, "/ucp/map_order/payment_handlers"},
	},
}

func TestParseTable(t *testing.T) {
	total := 0
	for _, r := range Releases() {
		base := official(t, r)
		for _, c := range append(slicesClone(commonCases), releaseCases[r]...) {
			total++
			t.Run(string(r)+"/"+c.name, func(t *testing.T) {
				body := c.body(t, base)
				got, err := Parse(body)
				if c.code == "" {
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					if got.Release != r || canon.Digest(got.Canonical) != got.Digest {
						t.Fatalf("summary %+v", got)
					}
					return
				}
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("got %v, want *Error %s", err, c.code)
				}
				if e.Code != c.code || e.Pointer != c.pointer {
					t.Fatalf("got %s at %q (%s), want %s at %q", e.Code, e.Pointer, e.Detail, c.code, c.pointer)
				}
				if !errors.Is(err, sentinel(c.code)) {
					t.Fatalf("%v does not wrap its sentinel", err)
				}
				if e.Detail == "" || strings.Contains(e.Detail, "\n") {
					t.Fatalf("detail %q is not one line", e.Detail)
				}
			})
		}
	}
	if total < 80 {
		t.Fatalf("only %d cases", total)
	}
}

func slicesClone(s []envelopeCase) []envelopeCase { return append([]envelopeCase(nil), s...) }

// TestRelaxationKeepsBytes: a 2026-04-08 envelope without payment handlers
// is digested as sent, without the empty object the validator saw.
func TestRelaxationKeepsBytes(t *testing.T) {
	body := del("ucp", "payment_handlers")(t, official(t, Release20260408))
	c, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(c.Canonical, []byte("payment_handlers")) || len(c.PaymentHandlers) != 0 {
		t.Fatalf("canonical form gained payment_handlers: %s", c.Canonical)
	}
	want, _ := canon.Transform(body)
	if !bytes.Equal(c.Canonical, want) {
		t.Fatal("Canonical is not the canonical form of the body")
	}
}

// TestDetails pins a few messages people will read.
func TestDetails(t *testing.T) {
	base := official(t, Release20260825)
	for _, c := range []struct {
		body   []byte
		detail string
	}{
		{set(p("line_items.0.quantity"), n("2.0"))(t, base), "an integer must be written without fraction or exponent and lie within ±(2^53−1); got 2.0"},
		{del("id")(t, base), `missing required member "id"`},
		{set(p("totals"), []any{map[string]any{"type": "subtotal", "amount": n("1")}})(t, base), `totals must hold exactly one entry of type "total"; found 0`},
	} {
		_, err := Parse(c.body)
		var e *Error
		if !errors.As(err, &e) || e.Detail != c.detail {
			t.Errorf("got %v, want detail %q", err, c.detail)
		}
	}
}

func TestSchemasCompile(t *testing.T) {
	for _, r := range Releases() {
		rr, ok := rulesFor(r)
		if !ok || rr.schema == nil {
			t.Fatalf("%s: no validator", r)
		}
	}
	if _, ok := rulesFor("2026-01-11"); ok {
		t.Fatal("an unknown release selected a validator")
	}
}

func TestErrorShape(t *testing.T) {
	_, err := Parse([]byte(`{"ucp":{"version":"1999-01-01"}}`))
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrUnsupportedRelease) || e.ErrorCode() != CodeUnsupportedRelease ||
		e.ErrorDetail() != e.Detail || !strings.HasPrefix(err.Error(), `UCP_VERSION_UNSUPPORTED at "/ucp/version": `) {
		t.Fatalf("%#v", err)
	}
}
