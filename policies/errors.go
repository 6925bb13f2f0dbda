package policies

import "github.com/clearancehq/clearance/internal/core"

// Codes of bundles and their activation.
const (
	CodePolicyNotFound        = "POLICY_VERSION_NOT_FOUND"
	CodePolicyVersionConflict = "POLICY_VERSION_CONFLICT"
	CodePolicyPinUnknown      = "POLICY_VERSION_UNKNOWN"
	// CodeActiveVersionMismatch: an activation's expected_active_version is
	// not the org's active version (409; nothing changed).
	CodeActiveVersionMismatch = "ACTIVE_VERSION_MISMATCH"
	// CodeStaleAuthorization: the org's active version changed while a
	// request was decided (409): send it again.
	CodeStaleAuthorization = core.CodeStaleAuthorization
)
