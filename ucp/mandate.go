package ucp

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

const mandatePointer = "/ap2/checkout_mandate"

func mandateError(detail string) *Error { return newError(CodeInvalidMandate, mandatePointer, detail) }

// maxDisclosureNesting bounds how deep disclosures may reference one another.
const maxDisclosureNesting = 64

// CheckMandate checks ap2.checkout_mandate for shape and for binding to c;
// nil when c carries no mandate. Signatures are not verified: the issuer
// is the buyer's wallet or platform, whose keys Clearance does not hold.
//
// Shape (RFC 9901, SD-JWT with key binding): issuer-signed JWT, then
// disclosures, then a KB-JWT, separated by "~". Each JWT has three
// base64url segments, a JSON-object header with an alg other than "none",
// a JSON-object payload and a non-empty signature. _sd_alg, when present,
// is sha-256. Every disclosure is a base64url JSON array [salt, name,
// value] or [salt, value] whose digest the payload references exactly once
// (directly or through other disclosures), in _sd for object members and
// {"...": digest} for array elements. The KB-JWT header's typ is kb+jwt;
// its payload carries iat, aud, nonce and sd_hash, the base64url SHA-256
// of everything before it, the last "~" included.
//
// Binding, on the payload with its disclosures resolved: exactly one
// checkout claim, anywhere (a second is refused: one mandate authorizes
// one checkout, and each copy would cost a comparison with the whole
// envelope), bound to c:
//   - "checkout", an object: the checkout response the buyer authorized,
//     including ap2.merchant_authorization (UCP's AP2 mandate extension:
//     "the checkout mandate MUST contain the full checkout response
//     including the ap2.merchant_authorization field"). Its RFC 8785 form
//     must equal that of this envelope without ap2.checkout_mandate.
//   - "checkout_jwt", a string (AP2's closed Checkout Mandate: "the
//     merchant-signed JWT of the Checkout"): it must be this checkout's
//     merchant_authorization with its payload attached, header "."
//     b64url(TermsPayload) "." signature; a "checkout_hash" beside it, when
//     present, must be the base64url SHA-256 of that string.
func CheckMandate(c *Checkout) error {
	if c == nil || c.Mandate == "" {
		return nil
	}
	parts := strings.Split(c.Mandate, "~")
	if len(parts) < 2 {
		return mandateError(`not an SD-JWT: no "~" separator`)
	}
	kb := parts[len(parts)-1]
	if kb == "" {
		return mandateError("no key-binding JWT after the last \"~\": an SD-JWT+kb is required")
	}
	_, payload, err := parseJWT(parts[0], "issuer-signed JWT")
	if err != nil {
		return err
	}
	if alg, ok := payload["_sd_alg"]; ok && alg != "sha-256" {
		return mandateError(fmt.Sprintf("issuer-signed JWT: _sd_alg %s is not supported (only sha-256)", describe(alg)))
	}
	disclosures := map[string]*disclosure{}
	for i, d := range parts[1 : len(parts)-1] {
		dis, err := parseDisclosure(d, i)
		if err != nil {
			return err
		}
		if _, dup := disclosures[dis.digest]; dup {
			return mandateError(fmt.Sprintf("disclosure %d repeats an earlier one", i))
		}
		disclosures[dis.digest] = dis
	}
	resolved, err := resolve(payload, disclosures, 0)
	if err != nil {
		return err
	}
	for _, d := range disclosures {
		if !d.used {
			return mandateError(fmt.Sprintf("disclosure %d is not referenced by the issuer-signed JWT", d.index))
		}
	}
	kbHeader, kbPayload, err := parseJWT(kb, "key-binding JWT")
	if err != nil {
		return err
	}
	if kbHeader["typ"] != "kb+jwt" {
		return mandateError(`key-binding JWT: header typ must be "kb+jwt"`)
	}
	if _, ok := kbPayload["iat"].(json.Number); !ok {
		return mandateError("key-binding JWT: payload iat must be a number")
	}
	if !isAudience(kbPayload["aud"]) {
		return mandateError("key-binding JWT: payload aud must be a string or an array of strings")
	}
	if _, ok := kbPayload["nonce"].(string); !ok {
		return mandateError("key-binding JWT: payload nonce must be a string")
	}
	sum := sha256.Sum256([]byte(c.Mandate[:len(c.Mandate)-len(kb)]))
	if got, _ := kbPayload["sd_hash"].(string); got != b64.EncodeToString(sum[:]) {
		return mandateError("key-binding JWT: sd_hash is not the SHA-256 of the SD-JWT before it")
	}
	return c.checkBinding(resolved.(map[string]any))
}

type disclosure struct {
	index  int
	digest string // base64url SHA-256 of the disclosure as sent
	name   string // "" for an array element
	array  bool
	value  any
	used   bool
}

// parseJWT checks one compact JWS and returns its header and payload.
func parseJWT(s, what string) (header, payload map[string]any, err error) {
	seg := strings.Split(s, ".")
	if len(seg) != 3 || seg[0] == "" || seg[1] == "" || seg[2] == "" {
		return nil, nil, mandateError(what + ": not a compact JWS of three non-empty segments")
	}
	if _, err := b64.DecodeString(seg[2]); err != nil {
		return nil, nil, mandateError(what + ": signature is not base64url")
	}
	header, err = segmentObject(seg[0], what+" header")
	if err != nil {
		return nil, nil, err
	}
	if alg, _ := header["alg"].(string); alg == "" || alg == "none" {
		return nil, nil, mandateError(what + `: header alg must name a signature algorithm, not "none"`)
	}
	payload, err = segmentObject(seg[1], what+" payload")
	return header, payload, err
}

func segmentObject(s, what string) (map[string]any, error) {
	raw, err := b64.DecodeString(s)
	if err != nil {
		return nil, mandateError(what + " is not base64url")
	}
	tree, serr := decodeTree(raw)
	if serr != nil {
		return nil, mandateError(what + " is not strict JSON: " + serr.detail)
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return nil, mandateError(what + " must be a JSON object")
	}
	return m, nil
}

func parseDisclosure(s string, i int) (*disclosure, error) {
	what := fmt.Sprintf("disclosure %d", i)
	if s == "" {
		return nil, mandateError(what + " is empty")
	}
	raw, err := b64.DecodeString(s)
	if err != nil {
		return nil, mandateError(what + " is not base64url")
	}
	tree, serr := decodeTree(raw)
	if serr != nil {
		return nil, mandateError(what + " is not strict JSON: " + serr.detail)
	}
	arr, ok := tree.([]any)
	if !ok || (len(arr) != 2 && len(arr) != 3) {
		return nil, mandateError(what + " must be a JSON array of 2 or 3 elements")
	}
	if _, ok := arr[0].(string); !ok {
		return nil, mandateError(what + ": salt must be a string")
	}
	sum := sha256.Sum256([]byte(s))
	d := &disclosure{index: i, digest: b64.EncodeToString(sum[:]), value: arr[len(arr)-1], array: len(arr) == 2}
	if !d.array {
		name, ok := arr[1].(string)
		if !ok || name == "_sd" || name == "..." {
			return nil, mandateError(what + `: claim name must be a string other than "_sd" and "..."`)
		}
		d.name = name
	}
	return d, nil
}

// resolve replaces digests by their disclosures (RFC 9901 §7.1): every
// digest at most once, a disclosed member never over an existing one,
// array-element digests only to array-element disclosures. Digests
// without a disclosure are decoys and vanish.
func resolve(v any, ds map[string]*disclosure, depth int) (any, error) {
	if depth > maxDisclosureNesting {
		return nil, mandateError("disclosures nest too deep")
	}
	take := func(digest any, array bool) (*disclosure, error) {
		s, ok := digest.(string)
		if !ok {
			return nil, mandateError("a selective-disclosure digest must be a string")
		}
		d, ok := ds[s]
		if !ok {
			return nil, nil
		}
		if d.used {
			return nil, mandateError(fmt.Sprintf("disclosure %d is referenced twice", d.index))
		}
		if d.array != array {
			return nil, mandateError(fmt.Sprintf("disclosure %d is referenced as the wrong kind (member or array element)", d.index))
		}
		d.used = true
		return d, nil
	}
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for _, name := range slices.Sorted(maps.Keys(t)) {
			child := t[name]
			if name == "_sd" || (depth == 0 && name == "_sd_alg") {
				continue
			}
			r, err := resolve(child, ds, depth+1)
			if err != nil {
				return nil, err
			}
			out[name] = r
		}
		if sd, ok := t["_sd"]; ok {
			digests, ok := sd.([]any)
			if !ok {
				return nil, mandateError("_sd must be an array of digests")
			}
			for _, digest := range digests {
				d, err := take(digest, false)
				if err != nil {
					return nil, err
				}
				if d == nil {
					continue
				}
				if _, clash := out[d.name]; clash {
					return nil, mandateError(fmt.Sprintf("disclosure %d discloses member %q, which is already present", d.index, d.name))
				}
				r, err := resolve(d.value, ds, depth+1)
				if err != nil {
					return nil, err
				}
				out[d.name] = r
			}
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(t))
		for _, e := range t {
			if m, ok := e.(map[string]any); ok && len(m) == 1 {
				if digest, ok := m["..."]; ok {
					d, err := take(digest, true)
					if err != nil {
						return nil, err
					}
					if d == nil {
						continue
					}
					e = d.value
				}
			}
			r, err := resolve(e, ds, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
	return v, nil
}

func isAudience(v any) bool {
	switch t := v.(type) {
	case string:
		return t != ""
	case []any:
		for _, e := range t {
			if s, ok := e.(string); !ok || s == "" {
				return false
			}
		}
		return len(t) > 0
	}
	return false
}

// errManyCheckouts refuses a mandate carrying more than one checkout: it
// authorizes one, and comparing each copy with the envelope would let one
// body cost the server time quadratic in its size.
func errManyCheckouts() error { return mandateError("the mandate carries more than one checkout") }

// checkBinding applies the binding rule of CheckMandate to the resolved payload.
func (c *Checkout) checkBinding(payload map[string]any) error {
	found := 0
	var check func(v any) error
	check = func(v any) error {
		switch t := v.(type) {
		case map[string]any:
			for _, name := range slices.Sorted(maps.Keys(t)) {
				child := t[name]
				switch {
				case name == "checkout":
					if _, ok := child.(map[string]any); ok {
						if found++; found > 1 {
							return errManyCheckouts()
						}
						if err := c.bindCheckout(child); err != nil {
							return err
						}
						continue // the checkout's own members are the merchant's, not claims
					}
				case name == "checkout_jwt":
					if s, ok := child.(string); ok {
						if found++; found > 1 {
							return errManyCheckouts()
						}
						if err := c.bindCheckoutJWT(s, t["checkout_hash"]); err != nil {
							return err
						}
						continue
					}
				}
				if err := check(child); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range t {
				if err := check(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := check(payload); err != nil {
		return err
	}
	if found == 0 {
		return mandateError(`the mandate carries no checkout ("checkout" object or "checkout_jwt")`)
	}
	return nil
}

// bindingForm is the RFC 8785 form of a checkout as a mandate carries it:
// without ap2.checkout_mandate, and without ap2 when nothing else is in it.
func bindingForm(root map[string]any) ([]byte, error) {
	root = maps.Clone(root)
	if ap2, ok := root["ap2"].(map[string]any); ok {
		ap2 = maps.Clone(ap2)
		delete(ap2, "checkout_mandate")
		if len(ap2) == 0 {
			delete(root, "ap2")
		} else {
			root["ap2"] = ap2
		}
	}
	return marshalCanonical(root)
}

func (c *Checkout) bindCheckout(v any) error {
	carried := v.(map[string]any)
	want, err := c.checkoutBindingForm()
	if err != nil {
		return err
	}
	got, err := bindingForm(carried)
	if err != nil {
		return mandateError("the carried checkout cannot be canonicalized")
	}
	if bytes.Equal(got, want) {
		return nil
	}
	if id, _ := carried["id"].(string); id != c.ID {
		return mandateError(fmt.Sprintf("the mandate is bound to checkout %q, not %q", id, c.ID))
	}
	return mandateError("the checkout the mandate carries differs from this envelope")
}

// checkoutBindingForm is bindingForm of this envelope.
func (c *Checkout) checkoutBindingForm() ([]byte, error) {
	tree, serr := decodeTree(c.Canonical)
	if serr != nil {
		return nil, envelopeError(serr.pointer, "canonical form: "+serr.detail)
	}
	root, ok := tree.(map[string]any)
	if !ok {
		return nil, envelopeError("", "canonical form is not a JSON object")
	}
	out, err := bindingForm(root)
	if err != nil {
		return nil, envelopeError("", err.Error())
	}
	return out, nil
}

func (c *Checkout) bindCheckoutJWT(s string, hash any) error {
	if hash != nil {
		sum := sha256.Sum256([]byte(s))
		if h, _ := hash.(string); h != b64.EncodeToString(sum[:]) {
			return mandateError("checkout_hash is not the SHA-256 of checkout_jwt")
		}
	}
	if c.Terms == nil {
		return mandateError("the mandate carries checkout_jwt but the envelope has no ap2.merchant_authorization")
	}
	j, err := parseDetachedJWS(c.Terms.JWS)
	if err != nil {
		return err
	}
	payload, err := c.TermsPayload()
	if err != nil {
		return err
	}
	if s != j.header+"."+b64.EncodeToString(payload)+"."+j.signature {
		return mandateError("checkout_jwt is not this checkout's merchant_authorization with the checkout attached")
	}
	return nil
}
