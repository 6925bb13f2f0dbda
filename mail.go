package clearance

import (
	"log/slog"

	"github.com/clearancehq/clearance/connector"
	"github.com/clearancehq/clearance/internal/mail"
	"github.com/clearancehq/clearance/onboarding"
)

// Mailer sends mail (sign-up codes): implement it to send through a
// service of your own, or take one from NewMailer.
type Mailer = mail.Mailer

// MailMessage is one plain-text message to one address.
type MailMessage = mail.Message

// OnboardingOptions tunes sign-up: Options.Onboarding. Its Mailer, Admin,
// Signals and PolicyVersion are the engine's own and are ignored here.
type OnboardingOptions = onboarding.Config

// NewMailer returns the mailer a deployment configures: SMTP when smtpURL
// is set (smtp://[user:pass@]host:port with STARTTLS when offered, and
// required when there are credentials; smtps://host:port), otherwise a
// mailbox that writes each message as an .eml file in dataDir/mailbox and
// logs where. from is the sender's address.
func NewMailer(smtpURL, dataDir, from string, logger *slog.Logger) (Mailer, error) {
	return mail.Open(smtpURL, dataDir, from, logger)
}

// DeploymentBundle is what a mapping session's deployment bundle answers.
type DeploymentBundle = onboarding.Bundle

// AccountSession is an owner's browser sign-in, as resolved from its
// session cookie.
type AccountSession = onboarding.AccountSession

// AutomationAuthorizeError is a refused authorization request of the
// automation connector.
type AutomationAuthorizeError = connector.AuthorizeError

// AutomationTokenError is a refused token request (RFC 6749 §5.2).
type AutomationTokenError = connector.TokenError
