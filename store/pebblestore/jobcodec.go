package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/clearancehq/clearance/jobs"
	"github.com/clearancehq/clearance/store"
)

// Job records are binary: a decision that owes an event writes one, and
// every byte of it is synced, flushed and compacted with the decision.
// The first byte tells the forms apart: jobBinary, or '{' for the JSON
// that databases written before hold (decodeJob reads both).
//
//	jobBinary
//	flags                 1 byte: which of lease_until, due, created_at, updated_at are set
//	state                 uvarint length, bytes
//	attempts              uvarint
//	owner                 uvarint length, bytes
//	lease_until, due, created_at, updated_at
//	                      varint Unix microseconds each, when set
//	payload, result       uvarint length, bytes each
//	failure               uvarint length, bytes
const jobBinary = 0x01

const (
	flagLease = 1 << iota
	flagDue
	flagCreated
	flagUpdated
)

// encodeJob returns v's stored form. Times are kept to the microsecond
// (callers pass usTime'd times), in UTC.
func encodeJob(v jobValue) ([]byte, error) {
	if v.Attempts < 0 {
		return nil, fmt.Errorf("pebblestore: encode: job attempts %d", v.Attempts)
	}
	times := [4]time.Time{v.LeaseUntil, v.Due, v.CreatedAt, v.UpdatedAt}
	var flags byte
	for i, t := range times {
		if !t.IsZero() {
			flags |= 1 << i
		}
	}
	b := make([]byte, 0, 2+4*binary.MaxVarintLen64+binary.MaxVarintLen32+
		len(v.State)+len(v.Owner)+len(v.Payload)+len(v.Result)+len(v.Failure)+5*binary.MaxVarintLen32)
	b = append(b, jobBinary, flags)
	b = appendLPBytes(b, []byte(v.State))
	b = binary.AppendUvarint(b, uint64(v.Attempts))
	b = appendLPBytes(b, []byte(v.Owner))
	for _, t := range times {
		if !t.IsZero() {
			b = binary.AppendVarint(b, t.UnixMicro())
		}
	}
	b = appendLPBytes(b, v.Payload)
	b = appendLPBytes(b, v.Result)
	return appendLPBytes(b, []byte(v.Failure)), nil
}

func appendLPBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// decodeJob reads what encodeJob wrote, or the JSON of earlier databases.
func decodeJob(b []byte) (jobValue, error) {
	var v jobValue
	if len(b) > 0 && b[0] == '{' {
		err := decodeJSON(b, &v)
		return v, err
	}
	r := jobReader{b: b}
	if r.byte() != jobBinary {
		return v, fmt.Errorf("pebblestore: decode job: %w: unknown form", store.ErrCorrupt)
	}
	flags := r.byte()
	v.State = jobs.State(r.bytes())
	v.Attempts = int(r.uvarint())
	v.Owner = string(r.bytes())
	for i, t := range [4]*time.Time{&v.LeaseUntil, &v.Due, &v.CreatedAt, &v.UpdatedAt} {
		if flags&(1<<i) != 0 {
			*t = time.UnixMicro(r.varint()).UTC()
		}
	}
	if p := r.bytes(); len(p) > 0 {
		v.Payload = p
	}
	if p := r.bytes(); len(p) > 0 {
		v.Result = p
	}
	v.Failure = string(r.bytes())
	if r.err == nil && len(r.b) > 0 {
		r.err = errors.New("trailing bytes")
	}
	if r.err != nil || flags>>4 != 0 || v.Attempts < 0 {
		return jobValue{}, fmt.Errorf("pebblestore: decode job: %w: %v", store.ErrCorrupt, r.err)
	}
	return v, nil
}

// jobReader reads a binary job record; the first error sticks.
type jobReader struct {
	b   []byte
	err error
}

func (r *jobReader) fail(what string) {
	if r.err == nil {
		r.err = errors.New(what)
	}
	r.b = nil
}

func (r *jobReader) byte() byte {
	if len(r.b) < 1 {
		r.fail("short record")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *jobReader) uvarint() uint64 {
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *jobReader) varint() int64 {
	x, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return x
}

// bytes returns a copy of the next length-prefixed field.
func (r *jobReader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("field longer than the record")
		return nil
	}
	out := append([]byte(nil), r.b[:n]...)
	r.b = r.b[n:]
	return out
}
