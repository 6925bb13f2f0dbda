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

// Codes of drafts.
const (
	CodeDraftNotFound = "POLICY_DRAFT_NOT_FOUND"
	// CodeDraftRevisionMismatch: the draft is not at the expected revision
	// (409; nothing changed).
	CodeDraftRevisionMismatch = "DRAFT_REVISION_MISMATCH"
	// CodeDraftLimit: the org keeps MaxDrafts drafts already (409).
	CodeDraftLimit = "DRAFT_LIMIT_REACHED"
)

// Codes of replays, reproductions and explanations.
const (
	CodeReplayNotFound = "REPLAY_NOT_FOUND"
	// CodeReplayLimit: MaxActiveReplays of the org are queued or running (409).
	CodeReplayLimit = "REPLAY_LIMIT_REACHED"
	// CodeRecordedPolicyUnavailable: the bundle a dossier records is not
	// among the org's versions with that digest (409).
	CodeRecordedPolicyUnavailable = "RECORDED_POLICY_UNAVAILABLE"
	// CodeNotReplayable: the dossier's input cannot be rebuilt exactly
	// (409; the detail names the reason).
	CodeNotReplayable = "NOT_REPLAYABLE"
)
