package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	neturl "net/url"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// serve's config file: a YAML mapping whose keys are exactly serve's flag
// names and whose values are what the flag would be given, e.g.
//
//	addr: 0.0.0.0:8080
//	grant-ttl: 2m
//	webhook-retries: 10s,30s,2m
//
// A command-line flag wins over its environment variable, which wins over
// the file, which wins over the flag's default. The mechanism knows no flag
// by name: every flag serve defines is a key, so a flag added later works
// in the file with no more code.

// Where a setting's value came from.
const (
	fromFlag    = "flag"
	fromEnv     = "env"
	fromFile    = "file"
	fromDefault = "default"
)

// configFile is serve's --config and --check-config, and the source of each
// setting once the file is applied.
type configFile struct {
	path  string
	check bool

	sources map[string]string // flag name → fromFlag, fromEnv, fromFile or fromDefault
	detail  map[string]string // flag name → the variable, or the file's line
}

// addConfigFlags defines --config and --check-config on serve's flag set.
func addConfigFlags(fs *flag.FlagSet) *configFile {
	c := &configFile{}
	fs.StringVar(&c.path, "config", env("CLEARANCE_CONFIG", ""), "YAML file of serve settings keyed by flag name, e.g. addr: 0.0.0.0:8080; a flag given on the command line or by its environment variable wins over the file (env CLEARANCE_CONFIG)")
	fs.BoolVar(&c.check, "check-config", false, "read the flags, the environment and the config file, check the values, print the effective configuration with secrets hidden, and exit without starting")
	return c
}

// notInFile are flags a config file may not set: they say which file to
// read and what to do with it.
var notInFile = map[string]string{
	"config":       "names the config file itself",
	"check-config": "is an action: give it on the command line",
}

// envMention finds the environment variable a flag's usage names, the
// convention serve's flags follow ("... (env CLEARANCE_DATA)").
var envMention = regexp.MustCompile(`\(env (CLEARANCE_[A-Z0-9_]+)\)`)

// envVarOf is the environment variable that sets flag f, or "" when it has
// none.
func envVarOf(f *flag.Flag) string {
	if m := envMention.FindStringSubmatch(f.Usage); m != nil {
		return m[1]
	}
	return ""
}

// envVarName is the environment variable serve's convention gives a flag:
// CLEARANCE_ and its name in upper case with '-' as '_'.
func envVarName(flagName string) string {
	return "CLEARANCE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// apply sets, from the config file, every flag that neither the command
// line nor its environment variable set (env treats an empty variable as
// unset, and so does apply). Every key is checked, including those that do
// not apply: an unknown key, a value its flag refuses, a key given twice
// or a key that is not a single value is an error naming the key and line.
func (c *configFile) apply(fs *flag.FlagSet, lookupEnv func(string) (string, bool)) error {
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	c.sources, c.detail = map[string]string{}, map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		name := envVarOf(f)
		v, set := "", false
		if name != "" {
			v, set = lookupEnv(name)
		}
		switch {
		case onCommandLine[f.Name]:
			c.sources[f.Name] = fromFlag
		case set && v != "":
			c.sources[f.Name], c.detail[f.Name] = fromEnv, name
		default:
			c.sources[f.Name] = fromDefault
		}
	})
	if c.path == "" {
		return nil
	}
	settings, err := readConfigFile(c.path)
	if err != nil {
		return err
	}
	for _, s := range settings {
		at := fmt.Sprintf("config file %s, line %d", c.path, s.line)
		f := fs.Lookup(s.key)
		if why, ok := notInFile[s.key]; ok {
			return fmt.Errorf("%s: key %q %s; it may not be set in the file", at, s.key, why)
		}
		if f == nil {
			return fmt.Errorf("%s: unknown key %q: not a flag of clearance serve%s", at, s.key, suggestKey(fs, s.key))
		}
		if c.sources[s.key] != fromDefault {
			// Overridden: still checked, on a fresh value of the flag's type.
			if err := checkValue(f, s.value); err != nil {
				return fmt.Errorf("%s: %s: %s", at, s.key, badValue(f, s.value, err))
			}
			continue
		}
		if err := fs.Set(s.key, s.value); err != nil {
			return fmt.Errorf("%s: %s: %s", at, s.key, badValue(f, s.value, err))
		}
		c.sources[s.key], c.detail[s.key] = fromFile, fmt.Sprintf("line %d", s.line)
	}
	return nil
}

// setting is one key of the config file.
type setting struct {
	key, value string
	line       int
}

// readConfigFile reads the file's settings in order. The file is one YAML
// mapping of keys to single values; empty means no settings.
func readConfigFile(path string) ([]setting, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("config file %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config file %s, line %d: a second YAML document; the file is one mapping of flag names to values", path, more.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil // only comments
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config file %s, line %d: want a mapping of flag names to values, e.g. addr: 127.0.0.1:8080", path, root.Line)
	}
	firstLine := map[string]int{}
	var out []setting
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		at := fmt.Sprintf("config file %s, line %d", path, k.Line)
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
			return nil, fmt.Errorf("%s: a key must be a flag name", at)
		}
		if first, ok := firstLine[k.Value]; ok {
			return nil, fmt.Errorf("%s: key %q given twice (first on line %d)", at, k.Value, first)
		}
		firstLine[k.Value] = k.Line
		switch {
		case v.Kind != yaml.ScalarNode:
			return nil, fmt.Errorf("%s: %s: want a single value; a list is written as the flag takes it, comma-separated (10s,30s)", at, k.Value)
		case v.Tag == "!!null":
			return nil, fmt.Errorf("%s: %s: no value; write \"\" for an empty one, or leave the key out for the default", at, k.Value)
		}
		out = append(out, setting{key: k.Value, value: v.Value, line: k.Line})
	}
	return out, nil
}

// checkValue reports whether f would accept s, without changing f: it sets
// a fresh zero value of f's type. A flag whose value is not a pointer to
// plain data (a flag.Func, say) is not checked.
func checkValue(f *flag.Flag, s string) error {
	t := reflect.TypeOf(f.Value)
	if t.Kind() != reflect.Pointer {
		return nil
	}
	switch t.Elem().Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.String, reflect.Slice:
	default:
		return nil
	}
	fresh, ok := reflect.New(t.Elem()).Interface().(flag.Value)
	if !ok {
		return nil
	}
	return fresh.Set(s)
}

// badValue explains a value a flag refused; a duration flag's message
// shows the form it takes.
func badValue(f *flag.Flag, s string, err error) string {
	msg := fmt.Sprintf("invalid value %q: %v", s, err)
	if g, ok := f.Value.(flag.Getter); ok {
		if _, isDuration := g.Get().(time.Duration); isDuration {
			msg += " (want a Go duration such as 90s, 5m or 1h30m)"
		}
	}
	return msg
}

// suggestKey names the flag a mistyped key probably meant ("--addr",
// "grant_ttl"), or "".
func suggestKey(fs *flag.FlagSet, key string) string {
	guess := strings.ReplaceAll(strings.TrimLeft(strings.ToLower(key), "-"), "_", "-")
	if guess != key && fs.Lookup(guess) != nil {
		if _, refused := notInFile[guess]; !refused {
			return fmt.Sprintf("; did you mean %q?", guess)
		}
	}
	return " (clearance serve -h lists them)"
}

// printEffective writes every setting serve will run with as a config file
// (YAML), each value's source in its comment; secrets are hidden.
func (c *configFile) printEffective(w io.Writer, fs *flag.FlagSet) error {
	head := "clearance serve: the effective configuration; each comment says where the value came from\n"
	if c.path != "" {
		head += "config file: " + c.path
	} else {
		head += "no config file"
	}
	m := &yaml.Node{Kind: yaml.MappingNode}
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := notInFile[f.Name]; ok {
			return
		}
		v := &yaml.Node{Kind: yaml.ScalarNode, Value: hideSecrets(f.Name, f.Value.String()), LineComment: c.sources[f.Name]}
		if d := c.detail[f.Name]; d != "" {
			v.LineComment += " " + d
		}
		if v.Value == "" {
			v.Style = yaml.DoubleQuotedStyle // "" rather than a null
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: f.Name}, v)
	})
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, HeadComment: head, Content: []*yaml.Node{m}}); err != nil {
		return err
	}
	return enc.Close()
}

// hidden replaces a secret in the printed configuration.
const hidden = "xxxxx"

// hideSecrets hides the secrets a setting may carry: a URL's password and
// its query parameters that name a password, secret or token (a store URL's
// ?password=), and the whole value of a flag named for a secret that is
// not a file name.
func hideSecrets(flagName, v string) string {
	if v == "" {
		return v
	}
	if secretName(flagName) && !strings.HasSuffix(flagName, "-file") {
		return hidden
	}
	u, err := neturl.Parse(v)
	if err != nil {
		// An unescaped character in a password breaks the parse: show the
		// scheme only.
		if scheme, _, ok := strings.Cut(v, "://"); ok {
			return scheme + "://" + hidden
		}
		return v
	}
	if u.Scheme == "" {
		return v
	}
	q, changed := u.Query(), false
	for k := range q {
		if secretName(k) {
			q.Set(k, hidden)
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	if _, has := u.User.Password(); has {
		u.User = neturl.UserPassword(u.User.Username(), hidden)
	}
	return u.String()
}

// secretName reports whether a flag or parameter name names a secret.
func secretName(name string) bool {
	name = strings.ToLower(name)
	for _, s := range []string{"password", "secret", "token", "passwd"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}
