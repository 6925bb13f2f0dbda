package mail_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"

	"github.com/emersion/go-smtp"

	"github.com/clearancehq/clearance/internal/mail"
)

func ExampleMailbox() {
	data, err := os.MkdirTemp("", "clearance-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(data)

	mb, err := mail.NewMailbox(filepath.Join(data, "mailbox"), "no-reply@clearance.example", nil)
	if err != nil {
		panic(err)
	}
	err = mb.Send(context.Background(), mail.Message{
		To:      "ada@example.com",
		Subject: "Your sign-in code",
		Text:    "Your code is 493027.\nIt expires in 10 minutes.\n",
	})
	if err != nil {
		panic(err)
	}

	msgs, err := mail.ReadMailbox(mb.Dir())
	if err != nil {
		panic(err)
	}
	for _, m := range msgs {
		fmt.Println("To:", m.To)
		fmt.Println("Subject:", m.Subject)
		fmt.Print(m.Text)
	}
	// Output:
	// To: ada@example.com
	// Subject: Your sign-in code
	// Your code is 493027.
	// It expires in 10 minutes.
}

func ExampleSMTP() {
	// A real SMTP server in process, handing each message it receives to
	// received.
	received := make(chan []byte, 1)
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &exampleSession{received: received}, nil
	}))
	srv.Domain = "localhost"
	srv.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(l)
	defer l.Close()

	// This server offers no STARTTLS and the URL has no credentials, so the
	// message goes in clear; with user:pass@ it would be refused.
	s, err := mail.NewSMTP("smtp://"+l.Addr().String(), "no-reply@clearance.example", nil)
	if err != nil {
		panic(err)
	}
	err = s.Send(context.Background(), mail.Message{
		To:      "ada@example.com",
		Subject: "Votre code de connexion",
		Text:    "Votre code : 493027.\n",
	})
	if err != nil {
		panic(err)
	}

	m, err := mail.Parse(bytes.NewReader(<-received))
	if err != nil {
		panic(err)
	}
	fmt.Println("From:", m.From)
	fmt.Println("To:", m.To)
	fmt.Println("Subject:", m.Subject)
	fmt.Print(m.Text)
	// Output:
	// From: no-reply@clearance.example
	// To: ada@example.com
	// Subject: Votre code de connexion
	// Votre code : 493027.
}

type exampleSession struct{ received chan<- []byte }

func (s *exampleSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *exampleSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *exampleSession) Reset()                               {}
func (s *exampleSession) Logout() error                        { return nil }
func (s *exampleSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err == nil {
		s.received <- b
	}
	return err
}

func ExampleOpen() {
	data, err := os.MkdirTemp("", "clearance-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(data)

	// No --smtp-url: the mailbox under the data directory.
	m, err := mail.Open("", data, "no-reply@clearance.example", nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%T\n", m)

	m, err = mail.Open("smtp://mailer:secret@smtp.example.com:587", data, "no-reply@clearance.example", nil)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%T %s\n", m, m.(*mail.SMTP).Addr())
	// Output:
	// *mail.Mailbox
	// *mail.SMTP smtp.example.com:587
}

func ExampleMessage_Validate() {
	for _, to := range []string{
		"ada@example.com",
		"Ada Lovelace <ada@example.com>",
		"ada@example.com, eve@example.com",
		"ada@example.com\r\nBcc: eve@example.com",
	} {
		m := mail.Message{To: to, Subject: "Your sign-in code", Text: "493027"}
		fmt.Println(m.Validate())
	}
	// Output:
	// <nil>
	// mail: invalid message: To: display name not allowed
	// mail: invalid message: To: not one valid address
	// mail: invalid message: To: address must be printable ASCII
}
