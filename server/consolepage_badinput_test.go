package server_test

// The console page's routes in the bad-input suite. Both are public and hold no
// data; a file name the console does not serve is 404 ROUTE_NOT_FOUND,
// whatever it tries to reach.
func (s *badSuite) consolePageSpecs() map[string]routeSpec {
	return map[string]routeSpec{
		"GET /console": {},
		"GET /console/assets/{file}": {params: map[string]string{"file": "app.js"}, paramCodes: []string{"ROUTE_NOT_FOUND"},
			extra: func(q req) []badCase {
				var out []badCase
				for _, c := range []struct{ name, file string }{
					{"the page as an asset", "index.html"},
					{"an unknown file", "app.map"},
					{"a Go source file", "console.go"},
					{"a climb out of the folder", "..%2Fconsole.go"},
					{"a different case", "APP.JS"},
				} {
					p := q
					p.path = "/console/assets/" + c.file
					out = append(out, s.variant(p, catPath, c.name, "", "ROUTE_NOT_FOUND"))
				}
				return out
			}},
	}
}
