package pebblestore

import (
	"bytes"
	"github.com/cockroachdb/pebble/v2"

	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/ledger"
	"github.com/clearancehq/clearance/store"
)

// dossierMeta is the indexed part of a stored dossier. The org and dossier
// ids live in the key; the body follows the metadata verbatim.
type dossierMeta struct {
	DecisionID   string    `json:"decision_id"`
	EvaluationID string    `json:"evaluation_id,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	Outcome      string    `json:"outcome,omitempty"`
	Mode         string    `json:"mode,omitempty"`
	WorkflowKey  string    `json:"workflow_key,omitempty"`
	DecisionType string    `json:"decision_type,omitempty"`
}

// encodeDossier writes <uvarint len(meta)> <meta JSON> <body> under key
// straight into b's buffer: the body is most of a decision's bytes, and an
// intermediate copy of it was the largest allocation of a decision.
func encodeDossier(b *pebble.Batch, key []byte, r dossier.Stored) error {
	meta, err := json.Marshal(dossierMeta{r.DecisionID, r.EvaluationID, r.CreatedAt, r.Outcome, r.Mode, r.WorkflowKey, r.DecisionType})
	if err != nil {
		return fmt.Errorf("pebblestore: encode dossier: %w", err)
	}
	var lp [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(lp[:], uint64(len(meta)))
	op := b.SetDeferred(len(key), n+len(meta)+len(r.Body))
	copy(op.Key, key)
	copy(op.Value[copy(op.Value, lp[:n]):], meta)
	copy(op.Value[n+len(meta):], r.Body)
	if err := op.Finish(); err != nil {
		return fmt.Errorf("pebblestore: write: %w", err)
	}
	return nil
}

func decodeDossier(orgID, dossierID string, v []byte) (dossier.Stored, error) {
	rec, err := viewDossier(orgID, dossierID, v)
	rec.Body = append([]byte(nil), rec.Body...)
	return rec, err
}

// viewDossier is decodeDossier with a Body that aliases v (Dossiers yields
// it for the length of one call).
func viewDossier(orgID, dossierID string, v []byte) (dossier.Stored, error) {
	n, w := binary.Uvarint(v)
	if w <= 0 || n > uint64(len(v)-w) {
		return dossier.Stored{}, fmt.Errorf("pebblestore: dossier value: %w", store.ErrCorrupt)
	}
	var m dossierMeta
	// The metadata is read by a byte scan when it holds no escape (it was
	// most of the time of a Dossiers scan, which reads every dossier of a
	// window), else by JSON v2.
	if !scanMeta(v[w:w+int(n)], &m) {
		m = dossierMeta{}
		if err := jsonv2.Unmarshal(v[w:w+int(n)], &m); err != nil {
			return dossier.Stored{}, fmt.Errorf("pebblestore: decode dossier: %w: %w", store.ErrCorrupt, err)
		}
	}
	return dossier.Stored{
		OrgID:        orgID,
		DossierID:    dossierID,
		DecisionID:   m.DecisionID,
		EvaluationID: m.EvaluationID,
		CreatedAt:    m.CreatedAt,
		Outcome:      m.Outcome,
		Mode:         m.Mode,
		WorkflowKey:  m.WorkflowKey,
		DecisionType: m.DecisionType,
		Body:         v[w+int(n):],
	}, nil
}

// summaryValue is the stored form of dossier.Summary.
type summaryValue struct {
	DossierID    string    `json:"dossier_id"`
	DecisionID   string    `json:"decision_id"`
	CreatedAt    time.Time `json:"created_at"`
	Outcome      string    `json:"outcome,omitempty"`
	Mode         string    `json:"mode,omitempty"`
	WorkflowKey  string    `json:"workflow_key,omitempty"`
	DecisionType string    `json:"decision_type,omitempty"`
}

func encodeJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: encode: %w", err)
	}
	return b, nil
}

// decodeJSON reads what encodeJSON wrote. It uses JSON v2, which decodes
// these records about twice as fast as encoding/json; the stored form stays
// plain JSON.
func decodeJSON(b []byte, v any) error {
	if err := jsonv2.Unmarshal(b, v); err != nil {
		return fmt.Errorf("pebblestore: decode %T: %w: %w", v, store.ErrCorrupt, err)
	}
	return nil
}

// encodeCheckpoint returns <root 32 bytes> <uvarint len(origin)> <origin>
// <signed note>: every byte as given (the size is in the key).
func encodeCheckpoint(c ledger.Checkpoint) []byte {
	v := make([]byte, 0, tlog.HashSize+binary.MaxVarintLen64+len(c.Origin)+len(c.Note))
	v = append(v, c.Root[:]...)
	v = binary.AppendUvarint(v, uint64(len(c.Origin)))
	v = append(v, c.Origin...)
	return append(v, c.Note...)
}

func decodeCheckpoint(size uint64, v []byte) (ledger.Checkpoint, error) {
	c := ledger.Checkpoint{Size: size}
	if len(v) < tlog.HashSize {
		return c, fmt.Errorf("pebblestore: checkpoint value: %w", store.ErrCorrupt)
	}
	copy(c.Root[:], v)
	v = v[tlog.HashSize:]
	n, w := binary.Uvarint(v)
	if w <= 0 || n > uint64(len(v)-w) {
		return c, fmt.Errorf("pebblestore: checkpoint value: %w", store.ErrCorrupt)
	}
	c.Origin = string(v[w : w+int(n)])
	c.Note = append([]byte{}, v[w+int(n):]...)
	return c, nil
}

// scanMeta reads dossierMeta as encodeDossier writes it: an object of
// string members without escapes. It reports false for anything else.
func scanMeta(b []byte, m *dossierMeta) bool {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	b = b[1 : len(b)-1]
	for len(b) > 0 {
		name, rest, ok := metaString(b)
		if !ok || len(rest) == 0 || rest[0] != ':' {
			return false
		}
		var val []byte
		if val, b, ok = metaString(rest[1:]); !ok {
			return false
		}
		if len(b) > 0 {
			if b[0] != ',' || len(b) == 1 {
				return false
			}
			b = b[1:]
		}
		switch string(name) {
		case "decision_id":
			m.DecisionID = string(val)
		case "evaluation_id":
			m.EvaluationID = string(val)
		case "created_at":
			t, err := time.Parse(time.RFC3339Nano, string(val))
			if err != nil {
				return false
			}
			m.CreatedAt = t
		case "outcome":
			m.Outcome = string(val)
		case "mode":
			m.Mode = string(val)
		case "workflow_key":
			m.WorkflowKey = string(val)
		case "decision_type":
			m.DecisionType = string(val)
		default:
			return false
		}
	}
	return true
}

// metaString reads a JSON string without escapes at the start of b.
func metaString(b []byte) (s, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	i := bytes.IndexByte(b[1:], '"')
	if i < 0 || bytes.IndexByte(b[1:1+i], '\\') >= 0 {
		return nil, nil, false
	}
	return b[1 : 1+i], b[2+i:], true
}
