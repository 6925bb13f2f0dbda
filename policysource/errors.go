package policysource

// Codes of the policy-source routes.
const (
	// CodeInvalidSource: a member of the link is malformed (400, a field
	// error each); nothing was changed.
	CodeInvalidSource = "INVALID_POLICY_SOURCE"
	// CodeSourceNotAllowed: the repository is well formed but may not be
	// read from here (400): a local path outside every configured root, a
	// private or loopback destination while private destinations are not
	// allowed, plain http without them, or a transport other than
	// http(s) and local files.
	CodeSourceNotAllowed = "SOURCE_NOT_ALLOWED"
	// CodeSourceNotFound: the org has no policy source (404).
	CodeSourceNotFound = "SOURCE_NOT_FOUND"
)

// Reasons of a failed pull (PullResult.Reason, LastPull.Reason): stable
// words a client can branch on; Message says the rest.
const (
	// ReasonUnreadable: the repository, the ref or the commit could not be
	// read (unreachable, refused, not a repository, no such ref, too large,
	// timed out).
	ReasonUnreadable = "REPOSITORY_UNREADABLE"
	// ReasonBundleMissing: the directory holds no bundle file, or more than
	// one of bundle.json, bundle.yaml and bundle.yml.
	ReasonBundleMissing = "BUNDLE_NOT_FOUND"
	// ReasonBundleInvalid: the bundle does not compile (Problems lists why).
	ReasonBundleInvalid = "BUNDLE_INVALID"
	// ReasonTestsFailed: a test case failed or a test file did not parse.
	ReasonTestsFailed = "TESTS_FAILED"
	// ReasonPublishRefused: the policies feature refused the bundle (the
	// version exists with other content, the draft limit is reached).
	ReasonPublishRefused = "PUBLISH_REFUSED"
)
