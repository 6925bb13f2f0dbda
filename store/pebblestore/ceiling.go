package pebblestore

import "bytes"

// Write-once records (dossiers, their decision index, artifacts) are
// checked for an earlier record under the same key before they are
// written. Their ids are time-ordered (UUIDv7), so a new key is nearly
// always above every key of its range, and a lookup that must search the
// memtables and every level that spans the range (a tenth of the server's
// CPU per decision under load) proves nothing a comparison could not.
//
// An org's ceilings hold, per key range, a key no key of the range is
// above: the range's greatest key, read once per process, then raised by
// every write to the range. It is an upper bound at all times, also
// when a write is not committed (a higher ceiling only sends more keys to
// the lookup), because this process is the store's only writer and every
// writer of these ranges raises it. A key above its range's ceiling is
// absent; a key at or below it is looked up as before.
type ceilings map[string]*ceiling // range prefix -> its ceiling

// ceiling is one range's bound; key nil: the range is empty. A pointer, so
// that raising it does not assign to the map (which copies the prefix
// into a new string key each time).
type ceiling struct{ key []byte }

// absent reports whether key, in the range of keys that start with prefix,
// is known to be absent without a lookup. It reads the range's greatest key
// the first time. Call with t.mu held.
func (t *tx) absent(prefix, key []byte) (bool, error) {
	c := t.state.ceil[string(prefix)]
	if c == nil {
		k, _, found, err := lastKey(t.b, prefix, upperBound(prefix))
		if err != nil {
			return false, err
		}
		if !found {
			k = nil
		}
		if t.state.ceil == nil {
			t.state.ceil = ceilings{}
		}
		c = &ceiling{key: k}
		t.state.ceil[string(prefix)] = c
	}
	return c.key == nil || bytes.Compare(key, c.key) > 0, nil
}

// raise records a write of key in the range of prefix. Call with t.mu held,
// before every write to a range absent is asked about.
func (t *tx) raise(prefix, key []byte) {
	if c := t.state.ceil[string(prefix)]; c != nil && bytes.Compare(key, c.key) > 0 {
		c.key = append(c.key[:0], key...)
	}
}

// exists reports whether key, in the range of prefix, holds a record:
// without a lookup when it is above the range's ceiling. Call with t.mu
// held.
func (t *tx) exists(prefix, key []byte) (bool, error) {
	if ok, err := t.absent(prefix, key); err != nil || ok {
		return false, err
	}
	return has(t.b, key)
}
