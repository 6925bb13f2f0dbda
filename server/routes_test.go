package server

import (
	"regexp"
	"testing"
)

// TestPathParametersOneStyle: every path parameter of the route table is
// lowerCamelCase ({orgId}, {dossierId}), as most of the spec names them.
func TestPathParametersOneStyle(t *testing.T) {
	param := regexp.MustCompile(`\{([^}]*)\}`)
	camel := regexp.MustCompile(`^[a-z][a-z0-9]*([A-Z][a-z0-9]*)*$`)
	for _, rt := range (&Server{}).routes() {
		for _, m := range param.FindAllStringSubmatch(rt.pattern, -1) {
			if !camel.MatchString(m[1]) {
				t.Errorf("%s: path parameter {%s} is not lowerCamelCase", rt.pattern, m[1])
			}
		}
	}
}
