//go:build tools

// This file pins modules that packages under construction import, so go.mod
// stays stable while they are written. It is never built.
package clearance

import (
	_ "cel.dev/cel-go/cel"
	_ "github.com/cockroachdb/pebble/v2"
	_ "github.com/go-jose/go-jose/v4"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/google/uuid"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "golang.org/x/time/rate"
	_ "gopkg.in/yaml.v3"
)
