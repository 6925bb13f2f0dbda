package ucp

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/clearancehq/clearance/internal/canon"
)

// Release is a UCP release date, the value of ucp.version.
type Release string

// The supported releases.
const (
	Release20260408 Release = "2026-04-08"
	Release20260825 Release = "2026-08-25"
)

// Releases returns the supported releases, oldest first.
func Releases() []Release { return []Release{Release20260408, Release20260825} }

// MaxEnvelopeBytes bounds the body Parse accepts.
const MaxEnvelopeBytes = 1 << 20

// Checkout is the summary of a validated checkout response envelope.
type Checkout struct {
	Release  Release
	ID       string
	Status   string
	Currency string

	LineItems []LineItem
	Totals    []Total // as sent, in order
	Subtotal  int64   // the one subtotal entry
	Total     int64   // the one total entry

	// PaymentHandlers is ucp.payment_handlers flattened, sorted by
	// namespace then id; empty when a 2026-04-08 envelope has none.
	PaymentHandlers []PaymentHandler

	Terms   *MerchantAuthorization // ap2.merchant_authorization; nil when absent
	Mandate string                 // ap2.checkout_mandate; "" when absent

	Canonical []byte // RFC 8785 form of the whole envelope
	Digest    string // canon.Digest(Canonical)
}

// LineItem is one entry of line_items. The schema does not require a line
// item's totals to hold one subtotal and one total (only the checkout's
// totals), so Subtotal and Total are the amounts of its single entry of
// that type and 0 when it has none or several; Totals has them all.
type LineItem struct {
	ID       string
	ItemID   string
	Title    string
	Price    int64
	Quantity int64
	Subtotal int64
	Total    int64
	Totals   []Total
}

// Total is one totals entry.
type Total struct {
	Type   string
	Amount int64
}

// PaymentHandler is one entry of ucp.payment_handlers.
type PaymentHandler struct {
	Namespace string // the reverse-domain key, e.g. com.google.pay
	ID        string
	Version   string
}

// Parse validates body as a complete checkout response envelope of the
// release named by its ucp.version and returns its summary. Every failure
// is an *Error: UCP_VERSION_UNSUPPORTED when ucp.version is a string but
// names no supported release; UCP_MERCHANT_AUTHORIZATION_INVALID for a
// malformed ap2.merchant_authorization; UCP_MANDATE_INVALID for an
// ap2.checkout_mandate that is not a string; UCP_ENVELOPE_INVALID for
// everything else.
func Parse(body []byte) (*Checkout, error) {
	if len(body) > MaxEnvelopeBytes {
		return nil, envelopeError("", fmt.Sprintf("body larger than %d bytes", MaxEnvelopeBytes))
	}
	tree, serr := decodeTree(body)
	if serr != nil {
		return nil, envelopeError(serr.pointer, serr.detail)
	}
	root, ok := tree.(map[string]any)
	if !ok {
		return nil, envelopeError("", "the body must be a JSON object")
	}
	release, err := releaseOf(root)
	if err != nil {
		return nil, err
	}
	rules, ok := rulesFor(release)
	if !ok {
		return nil, newError(CodeUnsupportedRelease, "/ucp/version",
			fmt.Sprintf("release %q is not supported; supported: %s, %s", string(release), Release20260408, Release20260825))
	}
	instance := tree
	if rules.optionalPaymentHandlers {
		instance = withPaymentHandlers(root)
	}
	if err := rules.schema.Validate(instance); err != nil {
		return nil, schemaError(err, instance)
	}
	c := &Checkout{Release: release}
	if err := c.readAP2(root); err != nil {
		return nil, err
	}
	if err := c.readSummary(root); err != nil {
		return nil, err
	}
	canonical, cerr := canon.Transform(body)
	if cerr != nil {
		return nil, envelopeError("", cerr.Error())
	}
	if len(canonical) > MaxEnvelopeBytes {
		// RFC 8785 can lengthen numbers (1e21 is 1e+21); the canonical
		// form must be a body Parse accepts too.
		return nil, envelopeError("", fmt.Sprintf("canonical form larger than %d bytes", MaxEnvelopeBytes))
	}
	c.Canonical = canonical
	c.Digest = canon.Digest(canonical)
	return c, nil
}

// releaseOf reads ucp.version: its absence or a non-string is an invalid
// envelope; any string is a release name, supported or not.
func releaseOf(root map[string]any) (Release, error) {
	u, present := root["ucp"]
	if !present {
		return "", envelopeError("/ucp", `missing required member "ucp"`)
	}
	ucp, ok := u.(map[string]any)
	if !ok {
		return "", envelopeError("/ucp", "ucp must be an object")
	}
	v, present := ucp["version"]
	if !present {
		return "", envelopeError("/ucp/version", `missing required member "version"`)
	}
	s, ok := v.(string)
	if !ok {
		return "", envelopeError("/ucp/version", "ucp.version must be a string")
	}
	return Release(s), nil
}

// withPaymentHandlers returns root, or a copy whose ucp holds an empty
// payment_handlers when it has none. Only the validator sees the copy: the
// bytes digested are the body as sent.
func withPaymentHandlers(root map[string]any) any {
	ucp, _ := root["ucp"].(map[string]any)
	if _, ok := ucp["payment_handlers"]; ok {
		return root
	}
	u := maps.Clone(ucp)
	u["payment_handlers"] = map[string]any{}
	r := maps.Clone(root)
	r["ucp"] = u
	return r
}

func (c *Checkout) readAP2(root map[string]any) error {
	v, ok := root["ap2"]
	if !ok {
		return nil
	}
	ap2, ok := v.(map[string]any)
	if !ok {
		return envelopeError("/ap2", "ap2 must be an object")
	}
	if v, ok := ap2["merchant_authorization"]; ok {
		s, ok := v.(string)
		if !ok {
			return termsError("merchant_authorization must be a string")
		}
		ma, err := parseMerchantAuthorization(s)
		if err != nil {
			return err
		}
		c.Terms = ma
	}
	if v, ok := ap2["checkout_mandate"]; ok {
		s, ok := v.(string)
		if !ok || s == "" {
			return mandateError("checkout_mandate must be a non-empty string")
		}
		c.Mandate = s
	}
	return nil
}

// readSummary fills the summary from a tree the schema accepted; its
// checks only guard against a schema that says less than expected.
func (c *Checkout) readSummary(root map[string]any) error {
	var err error
	if c.ID, err = stringAt(root, "id", ""); err != nil {
		return err
	}
	if c.Status, err = stringAt(root, "status", ""); err != nil {
		return err
	}
	if c.Currency, err = stringAt(root, "currency", ""); err != nil {
		return err
	}
	items, _ := root["line_items"].([]any)
	for i, v := range items {
		li, err := readLineItem(v, i)
		if err != nil {
			return err
		}
		c.LineItems = append(c.LineItems, li)
	}
	if c.Totals, err = readTotals(root["totals"], "/totals"); err != nil {
		return err
	}
	sub, nsub := single(c.Totals, "subtotal")
	tot, ntot := single(c.Totals, "total")
	if nsub != 1 || ntot != 1 {
		return envelopeError("/totals", "totals must hold exactly one subtotal and exactly one total")
	}
	c.Subtotal, c.Total = sub, tot
	ucp, _ := root["ucp"].(map[string]any)
	c.PaymentHandlers, err = readPaymentHandlers(ucp["payment_handlers"])
	return err
}

func readLineItem(v any, i int) (LineItem, error) {
	at := "/line_items/" + strconv.Itoa(i)
	m, ok := v.(map[string]any)
	if !ok {
		return LineItem{}, envelopeError(at, "a line item must be an object")
	}
	var li LineItem
	var err error
	if li.ID, err = stringAt(m, "id", at); err != nil {
		return li, err
	}
	item, ok := m["item"].(map[string]any)
	if !ok {
		return li, envelopeError(at+"/item", "item must be an object")
	}
	if li.ItemID, err = stringAt(item, "id", at+"/item"); err != nil {
		return li, err
	}
	if li.Title, err = stringAt(item, "title", at+"/item"); err != nil {
		return li, err
	}
	if li.Price, err = integerAt(item, "price", at+"/item"); err != nil {
		return li, err
	}
	if li.Quantity, err = integerAt(m, "quantity", at); err != nil {
		return li, err
	}
	if li.Totals, err = readTotals(m["totals"], at+"/totals"); err != nil {
		return li, err
	}
	if a, n := single(li.Totals, "subtotal"); n == 1 {
		li.Subtotal = a
	}
	if a, n := single(li.Totals, "total"); n == 1 {
		li.Total = a
	}
	return li, nil
}

func readTotals(v any, at string) ([]Total, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, envelopeError(at, "totals must be an array")
	}
	out := make([]Total, 0, len(arr))
	for i, e := range arr {
		m, ok := e.(map[string]any)
		here := at + "/" + strconv.Itoa(i)
		if !ok {
			return nil, envelopeError(here, "a totals entry must be an object")
		}
		t, err := stringAt(m, "type", here)
		if err != nil {
			return nil, err
		}
		a, err := integerAt(m, "amount", here)
		if err != nil {
			return nil, err
		}
		out = append(out, Total{Type: t, Amount: a})
	}
	return out, nil
}

// single returns the amount of the entries of type t and how many there are.
func single(ts []Total, t string) (int64, int) {
	var amount int64
	n := 0
	for _, e := range ts {
		if e.Type == t {
			amount = e.Amount
			n++
		}
	}
	return amount, n
}

// readPaymentHandlers flattens the registry. A handler id names the
// handler for payment.instruments[].handler_id across namespaces, so a
// repeated id is ambiguous and refused.
func readPaymentHandlers(v any) ([]PaymentHandler, error) {
	reg, _ := v.(map[string]any)
	var out []PaymentHandler
	seen := map[string]bool{}
	for _, ns := range slices.Sorted(maps.Keys(reg)) {
		entries, ok := reg[ns].([]any)
		if !ok {
			return nil, envelopeError(pointerOf("ucp", "payment_handlers", ns), "a payment handler list must be an array")
		}
		for i, e := range entries {
			at := pointerOf("ucp", "payment_handlers", ns, strconv.Itoa(i))
			m, ok := e.(map[string]any)
			if !ok {
				return nil, envelopeError(at, "a payment handler must be an object")
			}
			id, err := stringAt(m, "id", at)
			if err != nil {
				return nil, err
			}
			ver, err := stringAt(m, "version", at)
			if err != nil {
				return nil, err
			}
			if seen[id] {
				return nil, envelopeError(at+"/id", fmt.Sprintf("payment handler id %q is not unique", id))
			}
			seen[id] = true
			out = append(out, PaymentHandler{Namespace: ns, ID: id, Version: ver})
		}
	}
	slices.SortStableFunc(out, func(a, b PaymentHandler) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

func stringAt(m map[string]any, name, at string) (string, error) {
	s, ok := m[name].(string)
	if !ok {
		return "", envelopeError(at+pointerOf(name), name+" must be a string")
	}
	return s, nil
}

func integerAt(m map[string]any, name, at string) (int64, error) {
	p := at + pointerOf(name)
	n, ok := m[name].(json.Number)
	if !ok || !isExactInteger(string(n)) {
		return 0, envelopeError(p, name+" must be an exact integer")
	}
	i, _ := strconv.ParseInt(string(n), 10, 64)
	return i, nil
}
