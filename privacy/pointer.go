package privacy

import (
	"strconv"
	"strings"
)

// tokens splits a checked pointer into its unescaped reference tokens.
func tokens(p string) []string {
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return parts
}

// lookup returns the value at pointer p in v (decoded JSON), and its
// parent with the key to replace it by.
func lookup(v any, p string) (any, func(any), bool) {
	toks := tokens(p)
	cur := v
	for i, t := range toks {
		last := i == len(toks)-1
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[t]
			if !ok {
				return nil, nil, false
			}
			if last {
				return next, func(nv any) { c[t] = nv }, true
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(t)
			if err != nil || n < 0 || n >= len(c) || (len(t) > 1 && t[0] == '0') {
				return nil, nil, false
			}
			if last {
				return c[n], func(nv any) { c[n] = nv }, true
			}
			cur = c[n]
		default:
			return nil, nil, false
		}
	}
	return nil, nil, false
}
