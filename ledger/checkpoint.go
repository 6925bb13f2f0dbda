package ledger

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Checkpoint is a signed tree head of one org's ledger: the RFC 9162 root
// hash of its first Size entries, under the log's origin line.
//
// Its signed form, Note, is a C2SP signed note whose text is the C2SP
// tlog-checkpoint body
//
//	<origin>\n<size>\n<base64 root>\n
//
// signed with the ledger Key. A Checkpoint read from a store is only what
// the store says; VerifyCheckpoint turns a Note into a Checkpoint one can
// rely on.
type Checkpoint struct {
	Origin string    `json:"origin"`
	Size   uint64    `json:"size"`
	Root   tlog.Hash `json:"root"` // base64 in JSON
	Note   []byte    `json:"-"`    // the signed note, byte for byte
}

// IsZero reports whether c is the zero Checkpoint: "never sealed".
func (c Checkpoint) IsZero() bool {
	return c.Origin == "" && c.Size == 0 && c.Root == (tlog.Hash{}) && c.Note == nil
}

// Origin returns the origin line of an org's ledger: "<issuer>/ledger/<org_id>".
// Clearance passes its issuer (the iss of its tokens); the origin names the
// log in every checkpoint, so checkpoints of one org never pass for
// another's.
func Origin(issuer, orgID string) string {
	return issuer + "/ledger/" + orgID
}

// checkOrigin: an origin is one non-empty line of printable UTF-8.
func checkOrigin(origin string) error {
	if origin == "" || !utf8.ValidString(origin) {
		return fmt.Errorf("%w: origin %q must be non-empty UTF-8", ErrCheckpointFormat, origin)
	}
	for _, r := range origin {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: origin %q has a control character", ErrCheckpointFormat, origin)
		}
	}
	return nil
}

// checkpointBody returns the C2SP tlog-checkpoint body.
func checkpointBody(origin string, size uint64, root tlog.Hash) string {
	return origin + "\n" + strconv.FormatUint(size, 10) + "\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n"
}

// parseCheckpointBody reads a C2SP tlog-checkpoint body: origin, decimal
// size without leading zeros, base64 root of 32 bytes, then optional
// non-empty extension lines (accepted and not interpreted).
func parseCheckpointBody(text string) (origin string, size uint64, root tlog.Hash, err error) {
	bad := func(why string) error { return fmt.Errorf("%w: %s", ErrCheckpointFormat, why) }
	body, ok := strings.CutSuffix(text, "\n")
	if !ok {
		return "", 0, root, bad("body does not end with a newline")
	}
	lines := strings.Split(body, "\n")
	if len(lines) < 3 {
		return "", 0, root, bad("body has fewer than 3 lines")
	}
	for _, l := range lines[3:] {
		if l == "" {
			return "", 0, root, bad("empty extension line")
		}
	}
	origin = lines[0]
	if err := checkOrigin(origin); err != nil {
		return "", 0, root, err
	}
	s := lines[1]
	size, perr := strconv.ParseUint(s, 10, 64)
	if perr != nil || size > math.MaxInt64 || (len(s) > 1 && s[0] == '0') {
		return "", 0, root, bad("size " + strconv.Quote(s) + " is not a decimal tree size")
	}
	raw, derr := base64.StdEncoding.Strict().DecodeString(lines[2])
	if derr != nil || len(raw) != tlog.HashSize {
		return "", 0, root, bad("root is not a base64 SHA-256 hash")
	}
	copy(root[:], raw)
	return origin, size, root, nil
}

// signCheckpoint signs the checkpoint body of (origin, size, root).
func signCheckpoint(signer note.Signer, origin string, size uint64, root tlog.Hash) (Checkpoint, error) {
	if err := checkOrigin(origin); err != nil {
		return Checkpoint{}, err
	}
	msg, err := note.Sign(&note.Note{Text: checkpointBody(origin, size, root)}, signer)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: sign checkpoint: %w", err)
	}
	return Checkpoint{Origin: origin, Size: size, Root: root, Note: msg}, nil
}

// VerifyCheckpoint checks that signedNote is a checkpoint signed by the
// ledger key verifierKey ("<name>+<hash>+<base64>", Key.VerifierKey) and
// returns it. It needs nothing but the key, so auditors run it offline.
//
// Callers must also check the returned Origin: one ledger key signs every
// org's checkpoints, and the origin says whose log it is (see Origin).
// Errors wrap ErrInvalidKey (the verifier key), ErrCheckpointSignature (no
// valid signature by that key) or ErrCheckpointFormat (not a checkpoint).
func VerifyCheckpoint(verifierKey string, signedNote []byte) (Checkpoint, error) {
	v, err := parseVerifier(verifierKey)
	if err != nil {
		return Checkpoint{}, err
	}
	return openCheckpoint(v, signedNote)
}

func openCheckpoint(v note.Verifier, signedNote []byte) (Checkpoint, error) {
	n, err := note.Open(signedNote, note.VerifierList(v))
	if err != nil {
		switch err.(type) {
		case *note.UnverifiedNoteError, *note.InvalidSignatureError:
			return Checkpoint{}, fmt.Errorf("%w: %v", ErrCheckpointSignature, err)
		}
		return Checkpoint{}, fmt.Errorf("%w: %v", ErrCheckpointFormat, err)
	}
	origin, size, root, err := parseCheckpointBody(n.Text)
	if err != nil {
		return Checkpoint{}, err
	}
	return Checkpoint{Origin: origin, Size: size, Root: root, Note: bytes.Clone(signedNote)}, nil
}

// signedBy reports whether c's note carries a signature line of signer's
// key (name and key hash; the signature itself is not checked).
func signedBy(c Checkpoint, signer note.Signer) bool {
	_, err := note.Open(c.Note, note.VerifierList())
	u, ok := err.(*note.UnverifiedNoteError)
	if !ok {
		return false
	}
	for _, s := range u.Note.UnverifiedSigs {
		if s.Name == signer.Name() && s.Hash == signer.KeyHash() {
			return true
		}
	}
	return false
}
