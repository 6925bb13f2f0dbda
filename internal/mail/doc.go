// Package mail sends Clearance's e-mail: sign-up and sign-in codes. It has
// one interface, Mailer, and two implementations.
//
// Message is what is sent: one recipient (a bare addr-spec such as
// ada@example.com, no display name), a subject and a plain-text UTF-8 body.
// Message.Validate refuses anything else before a byte is written or sent
// (the limits are on Message). Both Mailers render a Message into the same
// RFC 5322 bytes: Date, From, To, Subject (RFC 2047 Q-encoded unless plain
// ASCII), Message-ID, MIME-Version, a text/plain; charset=utf-8 body in
// quoted-printable, CRLF line endings, 7-bit clean.
//
// Mailbox, the default, delivers nothing: it writes each message as an .eml
// file in a directory (<data>/mailbox under the data directory, see Open)
// and logs the recipient and the file's path, so an operator without a mail
// server reads the codes there. Its guarantees:
//
//   - Whole or nothing: a message is written to a temporary file in the same
//     directory, synced, then renamed to <UTC time>-<random>.eml and the
//     directory synced. A reader never sees a partial .eml file, and a
//     Send that returned nil survives a crash.
//   - Owner only: the directory is 0700 (NewMailbox refuses an existing
//     one that group or others may access) and every file 0600, because the
//     files hold codes that sign users in.
//   - Distinct files: concurrent Sends never write to the same name.
//
// ReadMailbox reads such a directory back, oldest first.
//
// SMTP sends through a real server, given a URL:
//
//   - smtp://host:port: plain SMTP, upgraded with STARTTLS whenever the
//     server offers it; the certificate is verified. With no STARTTLS on
//     offer the message goes in clear (a local relay, typically). The first
//     connection only asks; when STARTTLS is offered the message goes on a
//     second one that must upgrade, since go-smtp upgrades only connections
//     it opened for STARTTLS.
//   - smtp://user:pass@host:port: STARTTLS is then required. A server that
//     does not offer it is refused before AUTH or MAIL: a password is never
//     sent in clear. Authentication is SASL PLAIN, after the upgrade.
//   - smtps://[user:pass@]host:port: implicit TLS (RFC 8314) from the
//     first byte.
//
// The port is always explicit, and anything else in the URL (another
// scheme, a path, a query, a fragment) is refused, so a typo does not
// silently weaken delivery. Send honours its context: the dial, the TLS
// handshake and every exchange end when the context does, and a context
// without a deadline gets DefaultTimeout.
//
// Neither Mailer logs, or puts in an error, a message's subject or body:
// they hold the codes. Logs name the recipient, and the file or the server.
// Errors from the SMTP URL never carry its password.
package mail
