package clearance

import "github.com/clearancehq/clearance/privacy"

// Personal data and erasure (see package privacy).
type (
	// DataProtectionSetting is an org's data-protection setting: the
	// intent member naming a decision's data subject and the members
	// holding personal data.
	DataProtectionSetting = privacy.Setting
	// ErasureRequest asks to erase one data subject of an org.
	ErasureRequest = privacy.ErasureRequest
	// ErasureRequester is who asked for an erasure.
	ErasureRequester = privacy.Requester
	// ErasureReceipt is an erasure's signed receipt and what it says.
	ErasureReceipt = privacy.Receipt
	// ErasureReceiptPayload is what an erasure receipt signs.
	ErasureReceiptPayload = privacy.ReceiptPayload
	// DossierView is a dossier as a reader is shown it (personal data
	// restored or marked erased).
	DossierView = privacy.View
)

// VerifyErasureReceipt checks an erasure receipt offline with the ledger
// verifier key the caller trusts.
func VerifyErasureReceipt(receipt, ledgerVerifierKey string) (ErasureReceiptPayload, error) {
	return privacy.VerifyReceipt(receipt, ledgerVerifierKey)
}
