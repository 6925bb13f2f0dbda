package policy

// Inbound signals as policies see them. Input.Signals maps a signal type
// to its latest event, {"data": <object>, "timestamp": <RFC 3339>,
// "received_at": <RFC 3339>, "age_seconds": <number>}: CEL reads it as
// signals["<type>"].data.<member>, and structured predicates as
// signals.<type>.data.<key> and signals.<type>.age_seconds. A type the
// org never received is absent: a predicate on it holds only for
// not_exists, and CEL should test `"<type>" in signals` first.

// Members of one signal in Input.Signals.
const (
	SignalData       = "data"
	SignalTimestamp  = "timestamp"
	SignalReceivedAt = "received_at"
	SignalAgeSeconds = "age_seconds"
)

// MaxSignalTypeLen is the longest signal type, in bytes.
const MaxSignalTypeLen = 128

// SignalTypeRule says in words what ValidSignalType accepts.
const SignalTypeRule = "1 to 128 characters of [A-Za-z0-9_.:-], starting with a letter or digit, without empty dot-separated segments"

// ValidSignalType reports whether t is a signal type: the one grammar of
// the signal ingress and of signal predicates.
func ValidSignalType(t string) bool {
	if t == "" || len(t) > MaxSignalTypeLen || !alnum(t[0]) || t[len(t)-1] == '.' {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case alnum(c), c == '_', c == ':', c == '-':
		case c == '.':
			if t[i-1] == '.' {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }
