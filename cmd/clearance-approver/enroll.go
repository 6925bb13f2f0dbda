package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/clearancehq/clearance/approver"
)

// enroll opens an enrollment link for an approver at a running service,
// with the org's credential from the credentials file, and prints the
// service's answer ({"approver_id", "enrollment_url"}).
func enroll(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("enroll", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", env("CLEARANCE_APPROVER_SERVER", "http://127.0.0.1:8090"), "the running service's address (env CLEARANCE_APPROVER_SERVER)")
	credsFile := fs.String("credentials-file", env("CLEARANCE_APPROVER_CREDENTIALS_FILE", ""), "the service's credentials file; the org's credential is taken from it")
	org := fs.String("org", "", "the org the approver decides for (required)")
	id := fs.String("approver", "", "the approver's id, e.g. an e-mail address (required)")
	name := fs.String("display-name", "", "the name the authenticator shows; empty means the approver id")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *org == "" || *id == "" || *credsFile == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "clearance-approver enroll: --org, --approver and --credentials-file are required")
		return 2
	}
	creds, err := readCredentials(*credsFile)
	if err != nil {
		fmt.Fprintf(stderr, "clearance-approver enroll: credentials file: %v\n", err)
		return 1
	}
	cred := ""
	for c, o := range creds {
		if o == *org && (cred == "" || c < cred) { // the same one every time
			cred = c
		}
	}
	if cred == "" {
		fmt.Fprintf(stderr, "clearance-approver enroll: the credentials file has no credential of org %q\n", *org)
		return 1
	}
	body, _ := json.Marshal(approver.EnrollApprover{ApproverID: *id, DisplayName: *name})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(*server, "/")+"/v1/approvers", bytes.NewReader(body))
	if err != nil {
		fmt.Fprintf(stderr, "clearance-approver enroll: %v\n", err)
		return 2
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "clearance-approver enroll: %v\n", err)
		return 1
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		fmt.Fprintf(stderr, "clearance-approver enroll: %v\n", err)
		return 1
	}
	if res.StatusCode != http.StatusCreated {
		fmt.Fprintf(stderr, "clearance-approver enroll: the service answered %s: %s\n", res.Status, bytes.TrimSpace(answer))
		return 1
	}
	var e approver.Enrollment
	if err := json.Unmarshal(answer, &e); err != nil || e.EnrollmentURL == "" {
		fmt.Fprintf(stderr, "clearance-approver enroll: unexpected answer: %s\n", bytes.TrimSpace(answer))
		return 1
	}
	out, _ := json.MarshalIndent(e, "", "  ")
	fmt.Fprintf(stdout, "%s\n", out)
	fmt.Fprintf(stderr, "Send the approver this link; it works once and expires in %s:\n  %s\n", approver.DefaultEnrollmentTTL, e.EnrollmentURL)
	return 0
}
