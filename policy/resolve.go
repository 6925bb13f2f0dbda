package policy

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownVersion is returned by Resolve for a pin that names no
// published version, and by a Source that has no such version.
var ErrUnknownVersion = errors.New("policy: unknown policy version")

// Source gives Resolve access to an org's published bundle versions.
type Source interface {
	// Version returns the published version v, or an error wrapping
	// ErrUnknownVersion when there is none.
	Version(v string) (*Compiled, error)
	// Active returns the org's active version, or nil when none is active
	// (the starter policy applies).
	Active() (*Compiled, error)
}

// Resolution is what Resolve picked: the policy a decision evaluates and
// records, and the org's active policy, the only one that authorizes.
type Resolution struct {
	Policy *Compiled // evaluated and recorded
	Active *Compiled // the org's active version, or the starter policy
}

// Authorizes reports whether the evaluated policy is the active one: only
// then may its answer authorize anything. Resolve makes them the same
// *Compiled; anything else, even an equal bundle loaded twice, does not
// authorize (fail closed).
func (r Resolution) Authorizes() bool { return r.Policy != nil && r.Policy == r.Active }

// Mode is the decision's effective mode for a requested mode: EffectiveMode
// of the evaluated bundle's mode, and SHADOW whenever the evaluated policy
// is not the active one.
func (r Resolution) Mode(requested Mode) Mode {
	if !r.Authorizes() {
		return ModeShadow
	}
	return EffectiveMode(r.Policy.Mode(), requested)
}

// Resolve picks the policy a decision uses. Without a pin it is the active
// version, else the starter policy. A pin selects what is evaluated and
// recorded, never what authorizes: a pin to another published version than
// the active one resolves to that version with Authorizes false; a pin that
// names no published version is an error, never a fallback.
func Resolve(src Source, pin string) (Resolution, error) {
	active, err := src.Active()
	if err != nil {
		return Resolution{}, err
	}
	published := active != nil
	if !published {
		active = Starter()
	}
	if pin == "" || published && pin == active.Snapshot().PolicyVersion {
		return Resolution{Policy: active, Active: active}, nil
	}
	c, err := src.Version(pin)
	if err != nil {
		return Resolution{}, err
	}
	if c == nil {
		return Resolution{}, fmt.Errorf("%w: %q", ErrUnknownVersion, pin)
	}
	return Resolution{Policy: c, Active: active}, nil
}

// ValidVersion reports whether s can name a bundle version (the grammar
// Load enforces on a bundle's version).
func ValidVersion(s string) bool { return validVersion(s) }

// CodeInvalidPin is the InputError code of a malformed context.policy_version.
const CodeInvalidPin = "INVALID_POLICY_VERSION"

// PolicyPin returns context.policy_version: "" when absent, else a
// non-empty string (anything else is an *InputError).
func (i Intent) PolicyPin() (string, error) {
	v, ok := i.Context["policy_version"]
	if !ok {
		return "", nil
	}
	s, isString := v.(string)
	if !isString || strings.TrimSpace(s) == "" {
		return "", &InputError{Code: CodeInvalidPin, Field: "context.policy_version",
			Message: "context.policy_version must be a non-empty string"}
	}
	return s, nil
}
