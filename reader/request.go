package reader

import (
	"encoding/base64"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/mod/sumdb/note"

	"github.com/clearancehq/clearance/internal/strictjson"
)

// request is the body of POST /v1/reader/verify, member by member as sent:
// null and wrong types are refused, never read as absent.
type request struct {
	Kind           jsontext.Value `json:"kind"`
	Artifact       jsontext.Value `json:"artifact"`
	ArtifactBase64 jsontext.Value `json:"artifact_base64"`
	ShareLink      jsontext.Value `json:"share_link"`
	LedgerKey      jsontext.Value `json:"ledger_key"`
	Envelopes      jsontext.Value `json:"envelopes"`
	ExportRecord   jsontext.Value `json:"export_record"`
}

// DecodeRequest reads the body of POST /v1/reader/verify strictly:
//
//	{"kind"?: Kind, "artifact"?: {…} | "artifact_base64"?: "…" | "share_link"?: "…",
//	 "ledger_key"?: "…", "envelopes"?: {…}, "export_record"?: {…}}
//
// Exactly one of artifact (a JSON artifact as it is), artifact_base64 (its
// bytes in standard base64: a zipped pack, or any artifact as a file) and
// share_link is required. Refusals are strictjson errors or ErrInvalidInput.
func DecodeRequest(raw []byte, opts strictjson.Options) (Input, error) {
	var r request
	opts.RejectUnknown = true
	if err := strictjson.Decode(raw, &r, opts); err != nil {
		return Input{}, err
	}
	var in Input
	var err error
	var kind string
	if kind, err = str(r.Kind, "kind"); err != nil {
		return Input{}, err
	}
	if r.Kind != nil && kind == "" {
		return Input{}, invalid(CodeKindUnknown, "kind is empty: omit it to detect the kind")
	}
	in.Kind = Kind(kind)
	if in.ShareLink, err = str(r.ShareLink, "share_link"); err != nil {
		return Input{}, err
	}
	if in.LedgerKey, err = str(r.LedgerKey, "ledger_key"); err != nil {
		return Input{}, err
	}
	if _, kerr := note.NewVerifier(in.LedgerKey); r.LedgerKey != nil && kerr != nil {
		return Input{}, invalid(CodeLedgerKeyInvalid, "ledger_key is not a ledger verifier key (name+hash+base64, as GET /.well-known/clearance-ledger-key answers): %v", kerr)
	}
	b64, err := str(r.ArtifactBase64, "artifact_base64")
	if err != nil {
		return Input{}, err
	}
	given := 0
	for _, present := range []bool{r.Artifact != nil, r.ArtifactBase64 != nil, r.ShareLink != nil} {
		if present {
			given++
		}
	}
	if given != 1 {
		return Input{}, invalid(CodeArtifactRequired, "send exactly one of artifact, artifact_base64 and share_link")
	}
	switch {
	case r.Artifact != nil:
		if r.Artifact.Kind() != '{' {
			return Input{}, wrongType("artifact", "a JSON object (a packet, capsule, consistency proof, JSON pack or manifest)")
		}
		in.Artifact = r.Artifact
	case r.ArtifactBase64 != nil:
		if in.Artifact, err = base64.StdEncoding.Strict().DecodeString(b64); err != nil || len(in.Artifact) == 0 {
			return Input{}, invalid(CodeArtifactInvalid, "artifact_base64 must be the artifact's bytes in standard base64 (RFC 4648 §4)")
		}
	case in.ShareLink == "":
		return Input{}, invalid(CodeArtifactInvalid, "share_link is empty")
	}
	if r.Envelopes != nil {
		if r.Envelopes.Kind() != '{' {
			return Input{}, wrongType("envelopes", "a producer-envelopes answer (an object)")
		}
		in.Envelopes = r.Envelopes
	}
	if r.ExportRecord != nil {
		if r.ExportRecord.Kind() != '{' {
			return Input{}, wrongType("export_record", "an audit-export record (an object)")
		}
		rec, err := ParseExportRecord(r.ExportRecord)
		if err != nil {
			return Input{}, err
		}
		in.ExportRecord = &rec
	}
	return in, nil
}

// str reads an optional string member: absent is "", anything but a
// string (null included) is refused.
func str(v jsontext.Value, name string) (string, error) {
	if v == nil {
		return "", nil
	}
	var s string
	if v.Kind() != '"' || json.Unmarshal(v, &s) != nil {
		return "", wrongType(name, "a string")
	}
	return s, nil
}

func wrongType(name, want string) error {
	return &strictjson.Error{Code: strictjson.CodeWrongType, Field: "/" + name, Detail: name + " must be " + want}
}
