package clearance

import (
	"github.com/clearancehq/clearance/checkout"
	"github.com/clearancehq/clearance/dossier"
)

// CheckoutRequest is one UCP checkout authorization (checkout.Request).
type CheckoutRequest = checkout.Request

// CheckoutAuthorization is the UCP-shaped answer of a checkout
// authorization (checkout.Authorization).
type CheckoutAuthorization = checkout.Authorization

// CheckoutRefused is a checkout the policy did not allow in ENFORCEMENT: a
// 403 whose Answer is the recorded, non-authoritative answer.
type CheckoutRefused = checkout.Refused

// DossierCheckout is what a checkout authorization verified before the
// policy saw it (dossier.Checkout).
type DossierCheckout = dossier.Checkout
