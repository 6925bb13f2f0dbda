package policy

// Outcome is the verdict of an evaluation. Its values are the wire strings.
type Outcome string

// The outcomes, from least to most restrictive.
const (
	OutcomeAllow          Outcome = "ALLOW"
	OutcomeEscalate       Outcome = "ESCALATE"
	OutcomeReviewRequired Outcome = "REVIEW_REQUIRED"
	OutcomeBlock          Outcome = "BLOCK"
)

// Valid reports whether o is one of the four outcomes.
func (o Outcome) Valid() bool { return o.Rank() >= 0 }

// Rank orders outcomes by restrictiveness: ALLOW 0 < ESCALATE 1 <
// REVIEW_REQUIRED 2 < BLOCK 3. An invalid outcome ranks -1.
func (o Outcome) Rank() int {
	switch o {
	case OutcomeAllow:
		return 0
	case OutcomeEscalate:
		return 1
	case OutcomeReviewRequired:
		return 2
	case OutcomeBlock:
		return 3
	}
	return -1
}

// Mode says whether decisions are enforced or only recorded.
type Mode string

// The modes.
const (
	ModeEnforcement Mode = "ENFORCEMENT"
	ModeShadow      Mode = "SHADOW"
)

// Valid reports whether m is ENFORCEMENT or SHADOW.
func (m Mode) Valid() bool { return m == ModeEnforcement || m == ModeShadow }

// EffectiveMode combines the bundle's mode with the mode a request asked
// for. The result is SHADOW when either says SHADOW; a request can never
// turn enforcement on, only the bundle can. A bundle mode other than
// ENFORCEMENT yields SHADOW; a requested "" means no preference.
func EffectiveMode(bundle, requested Mode) Mode {
	if bundle == ModeEnforcement && requested != ModeShadow {
		return ModeEnforcement
	}
	return ModeShadow
}

// EvaluatorVersion names the evaluation semantics implemented by this
// package. It is recorded in every Snapshot; it changes whenever the same
// bundle and input could produce a different decision.
const EvaluatorVersion = "clearance-policy/1"
