package checkout

import (
	"context"
	"errors"
	"strings"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/ucp"
)

// Terms statuses: what the merchant's terms signature proved.
const (
	TermsVerified   = "VERIFIED"    // verified with an active merchant key of the org
	TermsUnknownKey = "UNKNOWN_KEY" // signed under a kid the org has no active key for
	TermsAbsent     = "ABSENT"      // no ap2.merchant_authorization
)

// Mandate statuses.
const (
	MandatePresented = "PRESENTED" // an SD-JWT+kb checkout mandate of the right shape, bound to this checkout; its signatures are not verified
	MandateAbsent    = "ABSENT"    // none
)

// verified is a checkout that passed validation, with what its
// verification proved.
type verified struct {
	c       *ucp.Checkout
	terms   string
	kid     string
	mandate string
}

// verify validates body as a checkout envelope, verifies its terms against
// the org's merchant keys and checks its mandate. A refusal is a 400 naming
// the JSON pointer; a key store that cannot answer is a 503.
func (s *Service) verify(ctx context.Context, orgID string, body []byte) (verified, error) {
	// A grant keeps its checkout one level down in its bound intent, which
	// a claim reads back under the engine's JSON limits: a checkout those
	// limits would refuse there is refused here, before anything is
	// recorded, rather than bound to a grant nobody can claim.
	if err := strictjson.Validate(append(append([]byte{'['}, body...), ']'), s.d.JSON); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			ptr := "" // outside the envelope (trailing data): the whole body
			if rest, ok := strings.CutPrefix(se.Field, "/0"); ok && (rest == "" || strings.HasPrefix(rest, "/")) {
				ptr = rest
			}
			return verified{}, &core.Error{Kind: core.ErrInvalidRequest, Code: ucp.CodeInvalidEnvelope, Detail: se.Detail, Err: err,
				Fields: []core.FieldError{{Field: ptr, Message: se.Detail}}}
		}
		return verified{}, core.TranslateInput(err)
	}
	c, err := ucp.Parse(body)
	if err != nil {
		return verified{}, envelopeError(err)
	}
	v := verified{c: c, terms: TermsAbsent, mandate: MandateAbsent}
	if c.Terms != nil {
		err := ucp.VerifyTerms(c, func(kid string) (ucp.MerchantKey, error) {
			return registry.LookupMerchant(ctx, s.d.Store, orgID, kid)
		})
		switch {
		case err == nil:
			v.terms, v.kid = TermsVerified, c.Terms.KID
		case errors.Is(err, ucp.ErrUnknownKey):
			v.terms = TermsUnknownKey
			if registry.ValidKID(c.Terms.KID) { // else no key could have it: not worth showing anyone
				v.kid = c.Terms.KID
			}
		case errors.Is(err, ucp.ErrInvalidTerms):
			return verified{}, envelopeError(err)
		default:
			return verified{}, core.Unavailable("read merchant keys", err)
		}
	}
	if c.Mandate != "" {
		if err := ucp.CheckMandate(c); err != nil {
			return verified{}, envelopeError(err)
		}
		v.mandate = MandatePresented
	}
	if _, err := amountOf(c.Total, c.Currency); err != nil {
		return verified{}, err
	}
	return v, nil
}

// evidence is what the dossier records of the verification.
func (v verified) evidence() dossier.Checkout {
	return dossier.Checkout{Release: string(v.c.Release), CheckoutID: v.c.ID, Terms: v.terms, MerchantKID: v.kid, Mandate: v.mandate}
}

// summary is the checkout as CEL sees it (intent.checkout). Amounts are
// integers in minor units, as UCP sends them.
func (v verified) summary() map[string]any {
	c := v.c
	totals := make([]any, len(c.Totals))
	for i, t := range c.Totals {
		totals[i] = map[string]any{"type": t.Type, "amount": t.Amount}
	}
	items := make([]any, len(c.LineItems))
	for i, li := range c.LineItems {
		items[i] = map[string]any{"id": li.ID, "item_id": li.ItemID, "title": li.Title, "price": li.Price,
			"quantity": li.Quantity, "subtotal": li.Subtotal, "total": li.Total}
	}
	handlers := make([]any, len(c.PaymentHandlers))
	for i, h := range c.PaymentHandlers {
		handlers[i] = map[string]any{"namespace": h.Namespace, "id": h.ID, "version": h.Version}
	}
	return map[string]any{
		"release": string(c.Release), "id": c.ID, "status": c.Status, "currency": c.Currency,
		"subtotal": c.Subtotal, "total": c.Total, "totals": totals, "line_items": items,
		"payment_handlers": handlers, "digest": c.Digest, "mandate": v.mandate,
		"merchant": map[string]any{"terms": v.terms, "kid": v.kid},
	}
}
