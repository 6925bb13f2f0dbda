// Package onboarding is the accounts feature: an owner proves an e-mail
// address with a one-time code, gets an org (a workspace) and a
// short-lived onboarding grant, opens a signal-mapping session with it and
// takes the org's deployment bundle: its API key, a signals connector with
// its secret, the webhook URL and the active policy version. An owner
// signs in by code (an account session, which the automation connector of
// package connector builds on) and revokes every credential of a workspace
// at once.
//
// # Contract
//
//   - Start answers the same, and does the same work, whether or not the
//     address is known: it stores a fresh 6-digit code for the address
//     (only its MAC, secretbox.Box.MAC) and mails it. A code expires after
//     Config.CodeTTL, is good once, and is burned after
//     Config.MaxAttempts wrong tries; an address is sent at most
//     Config.MaxSends codes per Config.SendWindow (429 with Retry-After).
//     These limits live in the store, so every server sharing it applies
//     them.
//   - Verify accepts exactly six ASCII digits. A wrong, expired, used or
//     burned code, and an address that never asked for one, all get the
//     same 401 OTP_INVALID. Success creates the org and an onboarding grant
//     (clr_onb_…, good for Config.GrantTTL and only on the mapping routes)
//     in one transaction, and never an org API key.
//   - A mapping session belongs to one org; another org's credential does
//     not find it (404). The deployment bundle of a session is issued once:
//     the org's API key, shown once, is issued in the same transaction that
//     marks the session issued and revokes every onboarding grant of the
//     org; a second call is 409 BUNDLE_ALREADY_ISSUED and mints nothing.
//   - A sign-in code follows the sign-up code's rules in a record of its
//     own; an account session is a random secret stored by hash, good for
//     Config.SessionTTL until signed out. RevokeCredentials revokes every
//     live credential of a workspace the session's account owns.
//
// Accounts and codes are records of a pseudo-org of their own,
// AccountsOrgID, like the platform key's: an address is not an org's.
package onboarding
