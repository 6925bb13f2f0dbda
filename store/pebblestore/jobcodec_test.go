package pebblestore

import (
	"reflect"
	"testing"
	"time"

	"github.com/clearancehq/clearance/jobs"
)

// Every job record decodes to what was encoded.
func FuzzJobCodec(f *testing.F) {
	f.Add([]byte("p"), "queued", 0, "", int64(0), int64(0), []byte(nil), "", int64(1767225600123456), int64(1767225600123456))
	f.Add([]byte(nil), "running", 3, "own<er>&", int64(1767225600000001), int64(-1), []byte("{}"), "a\u2028\"\\\n", int64(0), int64(-5))
	f.Fuzz(func(t *testing.T, payload []byte, state string, attempts int, owner string, lease, due int64,
		result []byte, failure string, created, updated int64) {
		at := func(us int64) time.Time {
			if us == 0 {
				return time.Time{}
			}
			return time.UnixMicro(us).UTC()
		}
		v := jobValue{Payload: payload, State: jobs.State(state), Attempts: attempts, Owner: owner, LeaseUntil: at(lease),
			Due: at(due), Result: result, Failure: failure, CreatedAt: at(created), UpdatedAt: at(updated)}
		if len(v.Payload) == 0 {
			v.Payload = nil
		}
		if len(v.Result) == 0 {
			v.Result = nil
		}
		b, err := encodeJob(v)
		if attempts < 0 {
			if err == nil {
				t.Fatal("negative attempts encoded")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeJob(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("decoded %+v, want %+v", got, v)
		}
	})
}

// Records written as JSON by earlier databases still read, and damaged
// records are refused, never read as something else.
func TestJobCodecReadsJSONAndRefusesDamage(t *testing.T) {
	old := []byte(`{"payload":"cA==","state":"queued","attempts":2,"due":"2026-03-01T12:00:00.000001Z","created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:00:00Z"}`)
	v, err := decodeJob(old)
	if err != nil || string(v.Payload) != "p" || v.State != jobs.Queued || v.Attempts != 2 ||
		!v.Due.Equal(time.Date(2026, 3, 1, 12, 0, 0, 1000, time.UTC)) {
		t.Fatalf("JSON record: %+v, %v", v, err)
	}
	good, err := encodeJob(jobValue{Payload: []byte("payload"), State: jobs.Queued, Owner: "w", CreatedAt: time.UnixMicro(1).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{nil, {}, {0x02}, good[:len(good)-1], append(good[:len(good):len(good)], 0), {jobBinary, 0xf0, 0, 0, 0, 0, 0, 0}} {
		if v, err := decodeJob(bad); err == nil {
			t.Errorf("% x decoded to %+v", bad, v)
		}
	}
}
