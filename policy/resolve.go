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
	// Latest returns the newest published version, or nil when the org has
	// published none.
	Latest() (*Compiled, error)
}

// Resolve picks the policy a decision uses: the pinned version when pin is
// set (an unknown pin is an error, never a fallback), else the newest
// published version, else the starter policy.
func Resolve(src Source, pin string) (*Compiled, error) {
	if pin != "" {
		c, err := src.Version(pin)
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, fmt.Errorf("%w: %q", ErrUnknownVersion, pin)
		}
		return c, nil
	}
	c, err := src.Latest()
	if err != nil {
		return nil, err
	}
	if c == nil {
		return Starter(), nil
	}
	return c, nil
}

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
