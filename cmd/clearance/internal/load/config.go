package load

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Scenario names what one operation is.
type Scenario string

// Scenarios.
const (
	Evaluate Scenario = "evaluate"
	Cycle    Scenario = "cycle"
	Mixed    Scenario = "mixed"
)

// Defaults and bounds of Config.
const (
	DefaultTimeout    = 30 * time.Second
	DefaultCycleShare = 0.2
	MaxConcurrency    = 10000
	MaxDuration       = 24 * time.Hour
)

// Config is one run. Set Duration, Count or both.
type Config struct {
	Scenario Scenario
	// Target is the server's base URL, e.g. http://127.0.0.1:8080.
	Target string
	// AllowRemote permits a target that is not a loopback address.
	AllowRemote bool
	// APIKey is an org API key (scope org:* or decision:write plus
	// policy:write for cycles). When empty, PlatformKey creates an org.
	APIKey      string
	PlatformKey string
	// CycleShare is the share of cycles among operations in Mixed (0 to 1).
	CycleShare  float64
	Concurrency int
	// Duration is the measured window after Warmup; 0 means no time limit
	// (then Count must be set).
	Duration time.Duration
	// Count stops the run after this many measured operations; 0 means no
	// limit (then Duration must be set).
	Count  int64
	Warmup time.Duration
	// Orgs is how many orgs the run creates and loads (worker i loads org
	// i mod Orgs); 0 means 1. More than one needs PlatformKey.
	Orgs int
	// Prefill records this many decisions (evaluate operations, not
	// measured) in the run's org before the warmup, so that the run measures
	// a store of that size; the fill's time is reported (Result.Prefill).
	Prefill int64
	// Timeout bounds each request; 0 means DefaultTimeout.
	Timeout time.Duration
	// Progress receives a line per second while the run measures; nil
	// means none.
	Progress io.Writer
	// Client overrides the HTTP client (tests); nil means a client pooled
	// for Concurrency connections.
	Client *http.Client
	// SelfHosted is reported in the result: the caller started the server.
	SelfHosted bool
	// Peer, when set, makes the target a peer policy server instead of
	// Clearance (see doc.go): only Evaluate applies and no credentials are
	// sent, so APIKey and PlatformKey must be empty.
	Peer Peer
	// OPAPath is the data path of the decision an OPA peer answers;
	// empty means DefaultOPAPath.
	OPAPath string
	// Rate caps the operations started per second by all workers together
	// (warmup included, prefill not); 0 means no cap. A capped run is an
	// open load at a steady pace, for soaks: without a cap the workers
	// saturate the machine and latency measures that.
	Rate float64
}

// Validate checks the configuration, including CheckTarget.
func (c Config) Validate() error {
	switch c.Scenario {
	case Evaluate, Cycle, Mixed:
	default:
		return fmt.Errorf("unknown scenario %q: want evaluate, cycle or mixed", c.Scenario)
	}
	if err := CheckTarget(c.Target, c.AllowRemote); err != nil {
		return err
	}
	if c.Peer != "" {
		if err := c.validatePeer(); err != nil {
			return err
		}
	} else if c.OPAPath != "" {
		return errors.New("an OPA path applies to the opa peer only")
	} else if c.APIKey == "" && c.PlatformKey == "" {
		return errors.New("no credentials: give an org API key or a platform key")
	}
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		return fmt.Errorf("concurrency must be 1 to %d", MaxConcurrency)
	}
	if c.Duration < 0 || c.Duration > MaxDuration || c.Warmup < 0 || c.Warmup > MaxDuration || c.Timeout < 0 {
		return fmt.Errorf("duration and warmup must be 0 to %v, timeout not negative", MaxDuration)
	}
	if c.Count < 0 {
		return errors.New("count must not be negative")
	}
	if c.Orgs < 0 || c.Orgs > c.Concurrency {
		return fmt.Errorf("orgs must be 0 to the concurrency (%d)", c.Concurrency)
	}
	if c.Orgs > 1 && c.PlatformKey == "" {
		return errors.New("more than one org needs a platform key: the run creates them")
	}
	if c.Prefill < 0 {
		return errors.New("prefill must not be negative")
	}
	if c.Prefill > 0 && c.Peer != "" {
		return errors.New("prefill fills Clearance's store: a peer keeps none")
	}
	if c.Duration == 0 && c.Count == 0 {
		return errors.New("set a duration, a count or both")
	}
	if c.CycleShare < 0 || c.CycleShare > 1 || c.CycleShare != c.CycleShare {
		return errors.New("cycle share must be between 0 and 1")
	}
	if !(c.Rate >= 0) || math.IsInf(c.Rate, 1) {
		return errors.New("rate must be a finite number of operations per second, 0 for none")
	}
	return nil
}

// CheckTarget accepts an http(s) base URL without query or fragment whose
// host is localhost or a loopback address, or any host when allowRemote.
func CheckTarget(target string, allowRemote bool) error {
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Errorf("bad target %q: %v", target, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("bad target %q: want http:// or https://", target)
	}
	if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("bad target %q: want scheme://host[:port][/path] only", target)
	}
	if allowRemote {
		return nil
	}
	if !IsLoopback(u.Hostname()) {
		return fmt.Errorf("target host %q is not a loopback address: load only your own machine, or pass --allow-remote", u.Hostname())
	}
	return nil
}

// IsLoopback reports whether host is localhost or a loopback IP.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c Config) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// share is the effective share of cycles.
func (c Config) share() float64 {
	switch c.Scenario {
	case Cycle:
		return 1
	case Mixed:
		return c.CycleShare
	}
	return 0
}

// newClient is a client whose idle pool keeps a connection per worker.
func newClient(c Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // a load tool talks to its target directly
	tr.MaxIdleConns = 2 * c.Concurrency
	tr.MaxIdleConnsPerHost = c.Concurrency
	tr.MaxConnsPerHost = 0
	return &http.Client{Transport: tr, Timeout: c.timeout(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
