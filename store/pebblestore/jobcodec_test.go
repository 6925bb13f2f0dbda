package pebblestore

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/clearancehq/clearance/internal/jsonw"
	"github.com/clearancehq/clearance/jobs"
)

// encodeJob writes byte for byte what encoding/json writes for a job (HTML
// escaping off), and decodeJSON reads it back.
func FuzzEncodeJob(f *testing.F) {
	f.Add([]byte("p"), "queued", 0, "", int64(0), int64(0), []byte(nil), "", int64(1767225600123456), int64(1767225600123456))
	f.Add([]byte(nil), "running", 3, "own<er>&", int64(1767225600000001), int64(-1), []byte("{}"), "a\xffb \u2028\"\\\n", int64(0), int64(1))
	f.Fuzz(func(t *testing.T, payload []byte, state string, attempts int, owner string, lease, due int64,
		result []byte, failure string, created, updated int64) {
		at := func(us int64) time.Time {
			if us < 0 {
				return time.Time{}
			}
			return time.UnixMicro(us % (253402300799 * 1e6)).UTC()
		}
		v := jobValue{Payload: payload, State: jobs.State(state), Attempts: attempts, Owner: owner, LeaseUntil: at(lease),
			Due: at(due), Result: result, Failure: failure, CreatedAt: at(created), UpdatedAt: at(updated)}
		got, err := encodeJob(v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := jsonw.Reference(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("encodeJob\n got %s\nwant %s", got, want)
		}
		var back jobValue
		if err := decodeJSON(got, &back); err != nil {
			t.Fatal(err)
		}
		var ref jobValue
		if err := decodeJSON(want, &ref); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, ref) {
			t.Fatalf("decoded %+v, want %+v", back, ref)
		}
	})
}

// A year time.Time's MarshalJSON refuses is refused, as it was.
func TestEncodeJobRefusesOutOfRangeYears(t *testing.T) {
	v := jobValue{State: jobs.Queued, CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), UpdatedAt: time.Now()}
	if _, err := encodeJob(v); err == nil {
		t.Fatal("a job created in the year 10000 was encoded")
	}
}
