package privacy

import "github.com/clearancehq/clearance/internal/core"

// Codes of the data-protection and erasure routes. Every refusal is a
// *core.Error of one Kind.
const (
	// CodeInvalidSetting: a setting whose subject or personal members are
	// not RFC 6901 pointers into the intent, too many of them, or repeated
	// (400).
	CodeInvalidSetting = "INVALID_DATA_PROTECTION_SETTING"
	// CodeSettingNotFound: the org has no data-protection setting (404).
	CodeSettingNotFound = "DATA_PROTECTION_NOT_SET"
	// CodeInvalidSubject: subject_id is not 1 to MaxSubjectLen characters of
	// text without control characters (400).
	CodeInvalidSubject = "INVALID_SUBJECT_ID"
	// CodeSecretsNotConfigured: sealing needs the engine's secrets key to
	// wrap subject keys (503). A decision of an org whose setting applies
	// is refused rather than recorded in the clear.
	CodeSecretsNotConfigured = core.CodeSecretsNotConfigured
	// CodeLedgerKeyNotConfigured: a receipt is signed with the ledger key,
	// and the engine has none (503); nothing is erased.
	CodeLedgerKeyNotConfigured = "LEDGER_KEY_NOT_CONFIGURED"
	// CodePersonalDataUnreadable: a sealed dossier whose key exists does
	// not open (503): tampering or another secrets key.
	CodePersonalDataUnreadable = core.CodePersonalDataUnreadable
)
