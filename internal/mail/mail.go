package mail

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
)

// Mailer sends one message. Send validates m first (Message.Validate) and
// returns nil only when the message is written (Mailbox) or accepted by
// the server (SMTP); it never logs the subject or the body.
type Mailer interface {
	Send(ctx context.Context, m Message) error
}

var (
	_ Mailer = (*Mailbox)(nil)
	_ Mailer = (*SMTP)(nil)
)

// Open returns the Mailer a deployment configured: SMTP when smtpURL is not
// empty, otherwise a Mailbox in <dataDir>/mailbox. from is the sender's
// bare address for either.
func Open(smtpURL, dataDir, from string, logger *slog.Logger) (Mailer, error) {
	if smtpURL != "" {
		return NewSMTP(smtpURL, from, logger)
	}
	if dataDir == "" {
		return nil, errors.New("mail: no SMTP URL and no data directory for the mailbox")
	}
	return NewMailbox(filepath.Join(dataDir, "mailbox"), from, logger)
}
