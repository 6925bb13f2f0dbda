// Package policysource links an org to a directory of a Git repository and
// publishes the policy bundle kept there: a pull compiles the bundle at
// the commit a ref names, runs the directory's tests, and publishes only
// a bundle that compiles and passes every one of them.
//
// # Contract
//
// An org has at most one link (Put, Get, Delete; SOURCE_NOT_FOUND when
// none): {repository, ref, directory, publish, draft_name, every_minutes}.
// The repository is an https URL (http too, and private or loopback hosts,
// only when the engine allows private destinations), read through the
// engine's SSRF-guarded outbound client; or a local repository, named by
// an absolute path or a file:// URL, only under one of Config.LocalRoots
// (checked as written and again with every symlink resolved, at Put and at
// every pull). Anything else is SOURCE_NOT_ALLOWED; a malformed member is
// INVALID_POLICY_SOURCE (MISSING_FIELD when only the repository is
// absent), each with field errors, and changes nothing. The link is a
// record of the org and is not ledgered itself: what a pull publishes is,
// by the policies feature.
//
// Pull reads the ref (a branch, then a tag, of that name; a full refs/…
// name; HEAD; or a full commit id): an http(s) repository is fetched with
// go-git into memory at depth 1, the bytes received and what they inflate
// to capped, within Config.FetchTimeout; a local one is read in place. The
// directory must hold exactly one of bundle.json, bundle.yaml and
// bundle.yml; its tests are the *.yaml and *.yml files of its tests/
// (policy/policyfile's format), run against the bundle as it will be
// published, and they see the directory's JSON and YAML files only. The
// bundle's version becomes the commit id and its source the link
// {repository, commit, path}, so a decision made under it records the
// commit (source_commit). Then, as publish says: "draft" writes the draft
// draft_name (replacing what it held), "stage" publishes the version,
// "activate" publishes and activates it. A commit whose bundle is already
// there (the version with the same content, or the draft holding it) is
// "unchanged" and changes nothing — not even which version is active, so
// a rollback is not undone by the next pull. A repository that cannot be
// read, a bundle that does not compile, any failing test or a refused
// publish publishes nothing and is a PullResult with status "failed", a
// Reason and a Message, not an error; the link keeps each pull as
// last_pull. Errors are the store's.
//
// With every_minutes > 0 the org has one job of kind JobKind (its id the
// org's) due every_minutes after the link was saved, then after each
// scheduled pull. Run claims the due jobs of every org, leased by the
// store's clock, so servers sharing a store never pull one link twice at
// once and a pull whose worker died is taken over once its lease passes.
// Put with every_minutes 0, and Delete, stop the schedule.
package policysource
