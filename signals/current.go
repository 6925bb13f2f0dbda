package signals

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clearancehq/clearance/dossier"
	"github.com/clearancehq/clearance/internal/core"
	"github.com/clearancehq/clearance/policy"
)

// Current returns the org's latest signal of each type as
// policy.Input.Signals holds it — type → {data, timestamp, received_at,
// age_seconds}, age counted from the event's timestamp to now, never
// below 0 — and what a dossier records of each, sorted by type. An org
// without signals gets an empty map. A store failure is a 503: the caller
// refuses its request rather than deciding without them.
func (s *Service) Current(ctx context.Context, orgID string, now time.Time) (map[string]any, []dossier.Signal, error) {
	recs, err := s.d.Store.ArtifactsByRef(ctx, orgID, kindLatest, refLatest, 0)
	if err != nil {
		return nil, nil, core.Unavailable("read signals", err)
	}
	in := make(map[string]any, len(recs))
	used := make([]dossier.Signal, 0, len(recs))
	for _, r := range recs {
		var sg storedSignal
		if err := json.Unmarshal(r.Body, &sg); err != nil {
			return nil, nil, core.Unavailable("decode signal", err)
		}
		ts, err := time.Parse(time.RFC3339Nano, sg.Timestamp)
		if err != nil {
			return nil, nil, core.Unavailable("decode signal", err)
		}
		var data map[string]any
		if err := json.Unmarshal(sg.Data, &data); err != nil {
			return nil, nil, core.Unavailable("decode signal", err)
		}
		in[sg.Type] = map[string]any{
			policy.SignalData:       data,
			policy.SignalTimestamp:  sg.Timestamp,
			policy.SignalReceivedAt: sg.ReceivedAt,
			policy.SignalAgeSeconds: max(0, now.Sub(ts).Seconds()),
		}
		used = append(used, dossier.Signal{Type: sg.Type, EventID: sg.EventID, Timestamp: sg.Timestamp,
			ReceivedAt: sg.ReceivedAt, DataDigest: sg.DataDigest})
	}
	slices.SortFunc(used, func(a, b dossier.Signal) int { return strings.Compare(a.Type, b.Type) })
	return in, used, nil
}

// Recorded returns the data of the signal events a dossier recorded, by
// event id, for evaluating its decision again: each event is read from
// the org's kept events and its data checked against the recorded digest.
// An event no longer kept is core.ErrNotFound; one whose data does not
// match its digest is damage (503), never a silent substitute.
func (s *Service) Recorded(ctx context.Context, orgID string, used []dossier.Signal) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(used))
	for _, u := range used {
		r, err := s.d.Store.Artifact(ctx, orgID, kindEvent, u.EventID)
		if core.IsNotFound(err) {
			return nil, core.New(core.ErrNotFound, core.CodeNotFound, "signal event %q is no longer kept", u.EventID)
		}
		if err != nil {
			return nil, core.Unavailable("read signal event", err)
		}
		var sg storedSignal
		if err := json.Unmarshal(r.Body, &sg); err != nil {
			return nil, core.Unavailable("decode signal", err)
		}
		if sg.DataDigest != u.DataDigest {
			return nil, core.Unavailable("read signal event", fmt.Errorf("signal event %q does not match its recorded digest", u.EventID))
		}
		out[u.EventID] = sg.Data
	}
	return out, nil
}
