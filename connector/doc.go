// Package connector is the automation connector: an automation platform
// (a workflow tool acting for an org) is registered as an OAuth client,
// connected to a workspace by its owner's consent, and given an
// automation-scoped org credential with which it reads its workspace,
// installs the starter policy and registers callback URLs for
// decision.resolved.
//
// # Contract
//
//   - A client is public (no secret): PKCE S256 proves the code's
//     requester. Its redirect URIs are registered exactly (https, or http
//     on a loopback host) and matched byte for byte.
//   - CheckAuthorize refuses a request with an unknown client or an
//     unregistered redirect URI without redirecting anywhere
//     (AuthorizeError.Redirect false); other refusals go back to the
//     redirect URI with error and state.
//   - Approve needs an account session (package onboarding) whose account
//     owns the workspace; it installs the starter policy (SHADOW) only
//     when the org has no policy of its own, and issues a code good once,
//     for CodeLifetime, for the client, redirect URI and challenge it was
//     issued with. The consent form carries ConsentToken, a MAC of the
//     session and the request.
//   - Exchange spends a code once (TokenError otherwise) and issues an org
//     key with AutomationScopes, unless the org revoked every credential
//     after the code was approved. A code presented again by its client
//     within ReplayWindow of its expiry revokes what it was exchanged for.
//   - AddWebhook registers a callback URL (at most webhook.MaxCallbacks
//     per org, each URL once) through the outbound client's guard; each
//     callback is a destination of its own for decision.resolved, signed
//     with its own secret, answered once. RemoveWebhook stops its
//     deliveries, pending retries included.
//
// Clients and codes are records of onboarding.AccountsOrgID; callbacks
// are records of their org.
package connector
