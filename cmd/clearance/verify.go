package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"strings"

	"github.com/clearancehq/clearance/privacy"
	"github.com/clearancehq/clearance/reader"
)

const verifyUsage = `usage: offline verification, with public keys only
  clearance verify packet  --ledger-key KEY PACKET.json
  clearance verify capsule [--envelopes ENVELOPES.json] CAPSULE.json
  clearance verify ledger  --ledger-key KEY CONSISTENCY.json
  clearance verify pack    --ledger-key KEY --record RECORD.json [--export-key HEX] PACK
  clearance verify receipt --ledger-key KEY RECEIPT
RECORD.json is the audit-export record (GET /v1/orgs/{orgId}/audit-exports/{exportId});
--export-key is the org's HMAC export key, held by the operator, to check the bundle signature.
KEY is the ledger verifier key (GET /.well-known/clearance-ledger-key), obtained out of band.
CONSISTENCY.json is an answer of GET /v1/protocol/audit/ledger/proofs/consistency.
RECEIPT is an erasure's answer (POST /v1/orgs/{orgId}/erasures) or its compact JWS alone.
Exit status: 0 verified, 1 not verified, 2 usage or unreadable input.
`

// verify handles `clearance verify`: it prints a JSON report and exits 0
// only when everything verified.
func verify(args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		fmt.Fprint(stderr, verifyUsage)
		return 2
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, verifyUsage)
		return 0
	}
	fs := flag.NewFlagSet("verify "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	ledgerKey := fs.String("ledger-key", "", "ledger verifier key (name+hash+base64)")
	envelopes := fs.String("envelopes", "", "producer-envelopes answer to check against the capsule")
	record := fs.String("record", "", "audit-export record whose digests the pack must match")
	exportKey := fs.String("export-key", "", "the org's export HMAC key, hex (optional)")
	if err := fs.Parse(args[1:]); err != nil {
		return flagExit(err)
	}
	if fs.NArg() != 1 {
		fmt.Fprint(stderr, verifyUsage)
		return 2
	}
	raw, err := readInput(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "clearance: verify: %v\n", err)
		return 2
	}
	in := reader.Input{Kind: reader.Kind(args[0]), Artifact: raw, LedgerKey: *ledgerKey}
	switch args[0] {
	case "packet":
		if *ledgerKey == "" {
			fmt.Fprint(stderr, "clearance: verify packet needs --ledger-key: a packet cannot vouch for its own key\n")
			return 2
		}
	case "capsule":
		if *envelopes != "" {
			if in.Envelopes, err = readInput(*envelopes); err != nil {
				fmt.Fprintf(stderr, "clearance: verify: %v\n", err)
				return 2
			}
		}
	case "ledger":
		if *ledgerKey == "" {
			fmt.Fprint(stderr, "clearance: verify ledger needs --ledger-key\n")
			return 2
		}
	case "pack":
		if *ledgerKey == "" || *record == "" {
			fmt.Fprint(stderr, "clearance: verify pack needs --ledger-key and --record\n")
			return 2
		}
		raw, err := readInput(*record)
		if err != nil {
			fmt.Fprintf(stderr, "clearance: verify: %v\n", err)
			return 2
		}
		rec, err := reader.ParseExportRecord(raw)
		if err != nil {
			fmt.Fprint(stderr, "clearance: verify: --record is not a finished audit-export record\n")
			return 2
		}
		in.ExportRecord = &rec
		if *exportKey != "" {
			if in.ExportKey, err = hex.DecodeString(*exportKey); err != nil || len(in.ExportKey) == 0 {
				fmt.Fprint(stderr, "clearance: verify: --export-key must be hex\n")
				return 2
			}
		}
	case "receipt":
		if *ledgerKey == "" {
			fmt.Fprint(stderr, "clearance: verify receipt needs --ledger-key: a receipt cannot vouch for its own key\n")
			return 2
		}
		report, ok := verifyReceipt(raw, *ledgerKey)
		return printReport(stdout, report, ok)
	default:
		fmt.Fprintf(stderr, "clearance: verify: unknown artifact %q\n%s", args[0], verifyUsage)
		return 2
	}
	// The same entry point as the server's reader (POST /v1/reader/verify);
	// the command prints the kind's own report, as it always has.
	rep, err := reader.Verify(context.Background(), in, reader.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "clearance: verify: %v\n", err)
		return 2
	}
	return printReport(stdout, rep.Details, rep.Valid)
}

// printReport prints a verification report and returns the exit status.
func printReport(stdout io.Writer, report any, ok bool) int {
	b, _ := json.MarshalIndent(report, "", "  ")
	fmt.Fprintln(stdout, string(b))
	if !ok {
		return 1
	}
	return 0
}

// receiptReport is what `verify receipt` prints.
type receiptReport struct {
	Valid   bool                    `json:"valid"`
	Error   string                  `json:"error,omitempty"`
	Payload *privacy.ReceiptPayload `json:"payload,omitempty"`
}

// verifyReceipt checks an erasure receipt: the answer of an erasure route
// ({"receipt": …}) or the compact JWS itself.
func verifyReceipt(raw []byte, ledgerKey string) (receiptReport, bool) {
	jws := strings.TrimSpace(string(raw))
	if strings.HasPrefix(jws, "{") {
		var answer struct {
			Receipt string `json:"receipt"`
		}
		if err := json.Unmarshal(raw, &answer); err != nil {
			return receiptReport{Error: "not an erasure answer: " + err.Error()}, false
		}
		jws = answer.Receipt
	}
	p, err := privacy.VerifyReceipt(jws, ledgerKey)
	if err != nil {
		return receiptReport{Error: err.Error()}, false
	}
	return receiptReport{Valid: true, Payload: &p}, true
}

func readInput(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(io.LimitReader(os.Stdin, 64<<20))
	}
	return os.ReadFile(name)
}
