package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/capsule"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/pack"
	"github.com/clearancehq/clearance/privacy"
	"github.com/clearancehq/clearance/proof"
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
	fs := flag.NewFlagSet("verify "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	ledgerKey := fs.String("ledger-key", "", "ledger verifier key (name+hash+base64)")
	envelopes := fs.String("envelopes", "", "producer-envelopes answer to check against the capsule")
	record := fs.String("record", "", "audit-export record whose digests the pack must match")
	exportKey := fs.String("export-key", "", "the org's export HMAC key, hex (optional)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
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
	var (
		report any
		ok     bool
	)
	switch args[0] {
	case "packet":
		if *ledgerKey == "" {
			fmt.Fprint(stderr, "clearance: verify packet needs --ledger-key: a packet cannot vouch for its own key\n")
			return 2
		}
		res := proof.Verify(raw, *ledgerKey)
		report, ok = res, res.Valid
	case "capsule":
		var env []byte
		if *envelopes != "" {
			if env, err = readInput(*envelopes); err != nil {
				fmt.Fprintf(stderr, "clearance: verify: %v\n", err)
				return 2
			}
		}
		report, ok = verifyCapsule(raw, env)
	case "ledger":
		if *ledgerKey == "" {
			fmt.Fprint(stderr, "clearance: verify ledger needs --ledger-key\n")
			return 2
		}
		report, ok = verifyConsistency(raw, *ledgerKey)
	case "pack":
		if *ledgerKey == "" || *record == "" {
			fmt.Fprint(stderr, "clearance: verify pack needs --ledger-key and --record\n")
			return 2
		}
		rec, err := readInput(*record)
		if err != nil {
			fmt.Fprintf(stderr, "clearance: verify: %v\n", err)
			return 2
		}
		var r struct {
			ManifestSHA256 string `json:"manifest_sha256"`
			BundleSHA256   string `json:"bundle_sha256"`
			Signature      string `json:"bundle_signature_hmac_sha256"`
		}
		if err := json.Unmarshal(rec, &r); err != nil || r.BundleSHA256 == "" || r.ManifestSHA256 == "" {
			fmt.Fprint(stderr, "clearance: verify: --record is not a finished audit-export record\n")
			return 2
		}
		opts := pack.VerifyOptions{ManifestSHA256: r.ManifestSHA256, BundleSHA256: r.BundleSHA256, LedgerVerifierKey: *ledgerKey}
		if *exportKey != "" {
			if opts.Key, err = hex.DecodeString(*exportKey); err != nil || len(opts.Key) == 0 {
				fmt.Fprint(stderr, "clearance: verify: --export-key must be hex\n")
				return 2
			}
			opts.Signature = r.Signature
		}
		rep, err := pack.Verify(raw, opts)
		report, ok = rep, err == nil && rep.Valid
	case "receipt":
		if *ledgerKey == "" {
			fmt.Fprint(stderr, "clearance: verify receipt needs --ledger-key: a receipt cannot vouch for its own key\n")
			return 2
		}
		report, ok = verifyReceipt(raw, *ledgerKey)
	default:
		fmt.Fprintf(stderr, "clearance: verify: unknown artifact %q\n%s", args[0], verifyUsage)
		return 2
	}
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

type capsuleReport struct {
	Valid     bool             `json:"valid"`
	Class1    capsule.Result   `json:"class1"`
	Envelopes []envelopeReport `json:"envelopes,omitempty"`
}

type envelopeReport struct {
	OK        bool   `json:"ok"`
	PublicKey string `json:"public_key,omitempty"` // authenticated; trusting it is the caller's policy
	Error     string `json:"error,omitempty"`
}

// verifyCapsule runs the Class 1 checks and, when given, every producer
// envelope against the recomputed capsule ID.
func verifyCapsule(raw, envelopes []byte) (capsuleReport, bool) {
	rep := capsuleReport{Class1: capsule.Verify(raw)}
	rep.Valid = rep.Class1.OK
	if envelopes == nil {
		return rep, rep.Valid
	}
	var list struct {
		Envelopes []struct {
			COSESign1 []byte `json:"cose_sign1"`
		} `json:"envelopes"`
	}
	if err := json.Unmarshal(envelopes, &list); err != nil || len(list.Envelopes) == 0 || rep.Class1.IDRecomputed == nil {
		rep.Valid = false
		rep.Envelopes = []envelopeReport{{Error: "no envelope to check (or no capsule ID to check it against)"}}
		return rep, false
	}
	for _, e := range list.Envelopes {
		pub, err := capsule.VerifyEnvelope(e.COSESign1, *rep.Class1.IDRecomputed)
		if err != nil {
			rep.Valid = false
			rep.Envelopes = append(rep.Envelopes, envelopeReport{Error: err.Error()})
			continue
		}
		rep.Envelopes = append(rep.Envelopes, envelopeReport{OK: true, PublicKey: hex.EncodeToString(pub)})
	}
	return rep, rep.Valid
}

type consistencyReport struct {
	Valid   bool   `json:"valid"`
	Origin  string `json:"origin,omitempty"`
	OldSize uint64 `json:"old_size,omitempty"`
	NewSize uint64 `json:"new_size,omitempty"`
	Error   string `json:"error,omitempty"`
}

// verifyConsistency checks both checkpoints of a consistency answer with
// the trusted key and the proof between them.
func verifyConsistency(raw []byte, key string) (consistencyReport, bool) {
	var in struct {
		Proof         tlog.TreeProof `json:"proof"`
		OldCheckpoint string         `json:"old_checkpoint"`
		NewCheckpoint string         `json:"new_checkpoint"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return consistencyReport{Error: "not a consistency proof: " + err.Error()}, false
	}
	older, err := ledger.VerifyCheckpoint(key, []byte(in.OldCheckpoint))
	if err != nil {
		return consistencyReport{Error: "old checkpoint: " + err.Error()}, false
	}
	newer, err := ledger.VerifyCheckpoint(key, []byte(in.NewCheckpoint))
	if err != nil {
		return consistencyReport{Error: "new checkpoint: " + err.Error()}, false
	}
	rep := consistencyReport{Origin: newer.Origin, OldSize: older.Size, NewSize: newer.Size}
	switch {
	case older.Origin != newer.Origin:
		err = errors.New("the checkpoints are of different logs: " + older.Origin + ", " + newer.Origin)
	case !strings.Contains(newer.Origin, "/ledger/"):
		err = errors.New("not a Clearance ledger origin: " + newer.Origin)
	default:
		err = ledger.VerifyConsistency(older, newer, in.Proof)
	}
	if err != nil {
		rep.Error = err.Error()
		return rep, false
	}
	rep.Valid = true
	return rep, true
}
