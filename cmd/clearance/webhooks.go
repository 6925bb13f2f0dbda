package main

import (
	"fmt"
	"strings"
	"time"
)

// webhookFlags tune callback delivery (clearance.Options.Webhooks).
type webhookFlags struct {
	retries     durations
	lease, poll time.Duration
}

// durations is a flag of comma-separated positive durations.
type durations []time.Duration

func (d *durations) String() string {
	parts := make([]string, len(*d))
	for i, v := range *d {
		parts[i] = v.String()
	}
	return strings.Join(parts, ",")
}

func (d *durations) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		*d = nil // the default schedule, as the usage says
		return nil
	}
	var out []time.Duration
	for part := range strings.SplitSeq(s, ",") {
		v, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil {
			return err
		}
		if v <= 0 {
			return fmt.Errorf("%v is not positive", v)
		}
		out = append(out, v)
	}
	*d = out
	return nil
}
