package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// effective is one setting as serve --check-config prints it.
type effective struct {
	value, source string
}

// clearServeEnv unsets every CLEARANCE_ variable for the test, so that the
// machine's environment cannot change what serve reads (env treats an
// empty variable as unset).
func clearServeEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "CLEARANCE_") {
			t.Setenv(name, "")
		}
	}
}

// checkConfig runs serve --check-config in this process with args and
// returns the exit code, the settings printed and stderr.
func checkConfig(t *testing.T, args ...string) (int, map[string]effective, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"serve", "--check-config"}, args...), &out, &errb)
	if code != 0 {
		return code, nil, errb.String()
	}
	return code, parseEffective(t, out.Bytes()), errb.String()
}

// parseEffective reads --check-config's output: a YAML mapping whose line
// comments name each value's source.
func parseEffective(t *testing.T, data []byte) map[string]effective {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		t.Fatalf("--check-config printed no YAML mapping (%v):\n%s", err, data)
	}
	m := doc.Content[0]
	got := map[string]effective{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		got[m.Content[i].Value] = effective{value: m.Content[i+1].Value, source: strings.TrimPrefix(m.Content[i+1].LineComment, "# ")}
	}
	return got
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clearance.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every combination of command line, environment and file, for a flag that
// has an environment variable (addr) and one that has none (grant-ttl):
// the command line wins, then the environment, then the file, then the
// default; a variable a flag does not read changes nothing.
func TestConfigFilePrecedence(t *testing.T) {
	for _, tc := range []struct {
		flag, envVar, dflt          string
		onFlag, inEnv, inFile, want string // want is a value or "default"
		hasEnv                      bool
	}{
		{flag: "addr", envVar: "CLEARANCE_ADDR", dflt: "127.0.0.1:8080", onFlag: "127.0.0.1:1001", inEnv: "127.0.0.1:1002", inFile: "127.0.0.1:1003", hasEnv: true},
		{flag: "grant-ttl", envVar: "CLEARANCE_GRANT_TTL", dflt: "2m0s", onFlag: "1m1s", inEnv: "1m2s", inFile: "1m3s"},
	} {
		for mask := range 8 {
			useFlag, useEnv, useFile := mask&1 != 0, mask&2 != 0, mask&4 != 0
			name := fmt.Sprintf("%s/flag=%v,env=%v,file=%v", tc.flag, useFlag, useEnv, useFile)
			t.Run(name, func(t *testing.T) {
				clearServeEnv(t)
				args := []string{"--data", t.TempDir()}
				if useFlag {
					args = append(args, "--"+tc.flag, tc.onFlag)
				}
				if useEnv {
					t.Setenv(tc.envVar, tc.inEnv)
				}
				if useFile {
					args = append(args, "--config", writeConfig(t, "# a comment\n"+tc.flag+": "+tc.inFile+"\n"))
				}
				want := effective{value: tc.dflt, source: fromDefault}
				switch {
				case useFlag:
					want = effective{value: tc.onFlag, source: fromFlag}
				case useEnv && tc.hasEnv:
					want = effective{value: tc.inEnv, source: fromEnv + " " + tc.envVar}
				case useFile:
					want = effective{value: tc.inFile, source: fromFile + " line 2"}
				}
				code, got, stderr := checkConfig(t, args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				if got[tc.flag] != want {
					t.Fatalf("%s: got %+v, want %+v", tc.flag, got[tc.flag], want)
				}
			})
		}
	}
}

// CLEARANCE_CONFIG names the file when --config does not; an empty one is
// no file.
func TestConfigFileFromTheEnvironment(t *testing.T) {
	clearServeEnv(t)
	fromEnvFile, fromFlagFile := writeConfig(t, "log-level: warn\n"), writeConfig(t, "log-level: error\n")
	t.Setenv("CLEARANCE_CONFIG", fromEnvFile)
	if _, got, stderr := checkConfig(t, "--data", t.TempDir()); got["log-level"].value != "warn" {
		t.Fatalf("CLEARANCE_CONFIG: log-level %+v (%s)", got["log-level"], stderr)
	}
	if _, got, stderr := checkConfig(t, "--data", t.TempDir(), "--config", fromFlagFile); got["log-level"].value != "error" {
		t.Fatalf("--config over CLEARANCE_CONFIG: log-level %+v (%s)", got["log-level"], stderr)
	}
	t.Setenv("CLEARANCE_CONFIG", "")
	if _, got, stderr := checkConfig(t, "--data", t.TempDir()); got["log-level"] != (effective{"info", fromDefault}) {
		t.Fatalf("no config file: log-level %+v (%s)", got["log-level"], stderr)
	}
}

// The file sets flags of every kind serve has, and --check-config's output
// is itself a config file that reproduces the same settings.
func TestConfigFileSetsEveryKindOfFlag(t *testing.T) {
	clearServeEnv(t)
	path := writeConfig(t, `
allow-private-destinations: true
rate-limit: 12.5
rate-burst: 7
max-body: 4096
claim-lease: 45s
webhook-retries: 5s, 1m
issuer: "https://clearance.example.com"
store: ''
`)
	code, got, stderr := checkConfig(t, "--config", path, "--data", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for key, value := range map[string]string{"allow-private-destinations": "true", "rate-limit": "12.5", "rate-burst": "7",
		"max-body": "4096", "claim-lease": "45s", "webhook-retries": "5s,1m0s", "issuer": "https://clearance.example.com", "store": ""} {
		if got[key].value != value || !strings.HasPrefix(got[key].source, fromFile+" line ") {
			t.Errorf("%s: got %+v, want %q from the file", key, got[key], value)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--check-config", "--config", path, "--data", "d"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	again := writeConfig(t, out.String())
	code, round, stderr := checkConfig(t, "--config", again)
	if code != 0 {
		t.Fatalf("the printed configuration as a config file: exit %d: %s\n%s", code, stderr, out.String())
	}
	for key, e := range parseEffective(t, out.Bytes()) {
		if round[key].value != e.value {
			t.Errorf("round trip %s: %q, first %q", key, round[key].value, e.value)
		}
	}
}

// What a config file may not say is refused before anything starts (exit
// 2), with the key and the line; a bad value is refused even for a key the
// command line overrides.
func TestConfigFileRefusals(t *testing.T) {
	clearServeEnv(t)
	for _, tc := range []struct {
		name, text string
		extra      []string
		want       []string
	}{
		{"unknown key", "log-level: info\nadr: 127.0.0.1:1\n", nil, []string{"line 2", `unknown key "adr"`}},
		{"flag spelling", "grant_ttl: 5m\n", nil, []string{"line 1", `"grant_ttl"`, `did you mean "grant-ttl"`}},
		{"bad duration", "\n\ngrant-ttl: 5 minutes\n", nil, []string{"line 3", "grant-ttl", `"5 minutes"`, "Go duration"}},
		{"bad duration overridden by a flag", "grant-ttl: soon\n", []string{"--grant-ttl", "1m"}, []string{"line 1", "grant-ttl", `"soon"`}},
		{"bad number", "rate-burst: many\n", nil, []string{"line 1", "rate-burst", `"many"`}},
		{"bad bool", "allow-private-destinations: yes please\n", nil, []string{"line 1", "allow-private-destinations"}},
		{"key given twice", "addr: 127.0.0.1:1\nlog-level: info\naddr: 127.0.0.1:2\n", nil, []string{"line 3", `"addr" given twice (first on line 1)`}},
		{"config in the file", "config: other.yaml\n", nil, []string{"line 1", `"config"`}},
		{"check-config in the file", "check-config: true\n", nil, []string{"line 1", `"check-config"`}},
		{"a list", "webhook-retries:\n  - 10s\n  - 30s\n", nil, []string{"line 1", "webhook-retries", "comma-separated"}},
		{"no value", "store:\n", nil, []string{"line 1", "store", "no value"}},
		{"not a mapping", "- addr\n", nil, []string{"line 1", "mapping"}},
		{"two documents", "addr: 127.0.0.1:1\n---\naddr: 127.0.0.1:2\n", nil, []string{"second YAML document"}},
		{"syntax", "addr: [127.0.0.1\n", nil, []string{"line"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.text)
			code, _, stderr := checkConfig(t, append([]string{"--config", path, "--data", t.TempDir()}, tc.extra...)...)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, stderr)
			}
			for _, w := range append(tc.want, path) {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not say %q", stderr, w)
				}
			}
		})
	}
	code, _, stderr := checkConfig(t, "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != 2 || !strings.Contains(stderr, "missing.yaml") {
		t.Fatalf("a missing config file: exit %d, stderr %q", code, stderr)
	}
	// serve's own checks still apply to a value the file gave.
	code, _, stderr = checkConfig(t, "--config", writeConfig(t, "log-level: loud\n"))
	if code != 2 || !strings.Contains(stderr, "log-level") {
		t.Fatalf("log-level: loud: exit %d, stderr %q", code, stderr)
	}
	if code, got, stderr := checkConfig(t, "--config", writeConfig(t, "# nothing set\n")); code != 0 || got["addr"].source != fromDefault {
		t.Fatalf("a file of comments only: exit %d, %s", code, stderr)
	}
}

// --check-config prints no password, from the file or the environment.
func TestCheckConfigHidesSecrets(t *testing.T) {
	clearServeEnv(t)
	t.Setenv("CLEARANCE_SMTP_URL", "smtp://mailer:smtp-hunter2@mail.example.com:587")
	path := writeConfig(t, "store: postgres://clearance:pg-hunter2@db.example.com:5432/clearance?sslmode=verify-full&password=query-hunter2\n")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--check-config", "--config", path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.Contains(out.String(), "hunter2") {
		t.Fatalf("--check-config printed a secret:\n%s", out.String())
	}
	got := parseEffective(t, out.Bytes())
	if got["store"].value != "postgres://clearance:xxxxx@db.example.com:5432/clearance?password=xxxxx&sslmode=verify-full" ||
		got["smtp-url"].value != "smtp://mailer:xxxxx@mail.example.com:587" {
		t.Fatalf("store %q, smtp-url %q", got["store"].value, got["smtp-url"].value)
	}
	for in, want := range map[string]string{"127.0.0.1:8080": "127.0.0.1:8080", "https://clearance.example.com": "https://clearance.example.com",
		"https://u@approvals.example.com/x?token=t&a=b": "https://u@approvals.example.com/x?a=b&token=xxxxx",
		// A password that breaks the URL's parse, and a socket URL without a host.
		"postgres://app:p/ss@db/x": "postgres://xxxxx", "postgres://app:p%zz@db/x": "postgres://xxxxx",
		"postgres://app:pw@/db?host=/run/postgresql": "postgres://app:xxxxx@/db?host=/run/postgresql"} {
		if got := hideSecrets("approval-url", in); got != want {
			t.Errorf("hideSecrets(%q) = %q, want %q", in, got, want)
		}
	}
	if hideSecrets("platform-secret", "s3cr3t") != hidden || hideSecrets("share-secret-file", "/etc/x") != "/etc/x" {
		t.Error("a flag named for a secret is hidden, unless it names a file")
	}
}

// serveFlagUsages reads serve -h: every flag's name and usage.
func serveFlagUsages(t *testing.T) map[string]string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"serve", "-h"}, &out, &errb); code != 0 {
		t.Fatalf("serve -h: exit %d", code)
	}
	usages := map[string]string{}
	name := ""
	sc := bufio.NewScanner(&errb)
	flagLine := regexp.MustCompile(`^  -([a-z0-9-]+)`)
	for sc.Scan() {
		if m := flagLine.FindStringSubmatch(sc.Text()); m != nil {
			name = m[1]
			usages[name] = ""
		} else if name != "" {
			usages[name] += strings.TrimSpace(sc.Text()) + " "
		}
	}
	if len(usages) < 30 {
		t.Fatalf("serve -h lists %d flags:\n%s", len(usages), errb.String())
	}
	return usages
}

// The environment must lose to the command line and win over the file:
// apply knows which flags read a variable from their usage, "(env
// CLEARANCE_NAME)". Every such variable is named by the convention, and
// no flag reads a variable its usage does not name.
func TestServeFlagsNameTheirEnvironmentVariables(t *testing.T) {
	clearServeEnv(t)
	usages := serveFlagUsages(t)
	var silent []string
	for name, usage := range usages {
		m := envMention.FindStringSubmatch(usage)
		switch {
		case m == nil:
			silent = append(silent, name)
		case m[1] != envVarName(name):
			t.Errorf("--%s names %s; the convention is %s", name, m[1], envVarName(name))
		}
	}
	_, before, stderr := checkConfig(t)
	if before == nil {
		t.Fatal(stderr)
	}
	for _, name := range silent {
		t.Setenv(envVarName(name), "probe-"+name)
	}
	code, after, stderr := checkConfig(t)
	if code != 0 {
		t.Fatalf("with CLEARANCE_<FLAG>=probe-<flag> for every flag whose usage names no variable: exit %d: %s (a flag reads a variable its usage does not name)", code, stderr)
	}
	for name, e := range before {
		if after[name] != e {
			t.Errorf("--%s reads %s but its usage does not say so: %+v, then %+v", name, envVarName(name), e, after[name])
		}
	}
}

// exampleConfig is the example config file the docs and the systemd unit
// point at.
const exampleConfig = "../../deploy/clearance.yaml"

// commentedKey is a key of the example file left commented out with its
// default or an example value ("# grant-ttl: 2m").
var commentedKey = regexp.MustCompile(`(?m)^# ([a-z][a-z0-9-]*): `)

// The example config file is read without error; every key in it, set or
// commented out, is a serve flag and every serve flag is in it; with every
// commented line restored, it is still read without error.
func TestExampleConfigFile(t *testing.T) {
	clearServeEnv(t)
	code, got, stderr := checkConfig(t, "--config", exampleConfig)
	if code != 0 {
		t.Fatalf("%s: exit %d: %s", exampleConfig, code, stderr)
	}
	data, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	settings, err := readConfigFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range settings {
		keys = append(keys, s.key)
		if !strings.HasPrefix(got[s.key].source, fromFile) {
			t.Errorf("%s: %s is not from the file: %+v", exampleConfig, s.key, got[s.key])
		}
	}
	for _, m := range commentedKey.FindAllStringSubmatch(string(data), -1) {
		keys = append(keys, m[1])
	}
	usages := serveFlagUsages(t)
	for _, k := range keys {
		if _, ok := usages[k]; !ok {
			t.Errorf("%s: %q is not a flag of clearance serve", exampleConfig, k)
		}
	}
	for name := range usages {
		if _, ok := notInFile[name]; !ok && !slices.Contains(keys, name) {
			t.Errorf("%s does not show --%s: add it, set or commented out, with its default", exampleConfig, name)
		}
	}
	restored := commentedKey.ReplaceAllString(string(data), "$1: ")
	if code, _, stderr := checkConfig(t, "--config", writeConfig(t, restored)); code != 0 {
		t.Fatalf("%s with every key restored: exit %d: %s", exampleConfig, code, stderr)
	}
}

// A real server takes its settings from the file, and the command line
// still wins: the file's address is taken by nothing, startServer's
// --addr 127.0.0.1:0 is used; the file's metrics listener starts.
func TestServeRunsWithAConfigFile(t *testing.T) {
	path := writeConfig(t, "addr: 127.0.0.1:1\nmetrics-addr: 127.0.0.1:0\nlog-level: debug\n")
	s := startServer(t, t.TempDir(), "--config", path)
	if !s.hasLog("metrics listening") {
		t.Fatalf("the file's metrics-addr was not used: %v", s.logLines())
	}
	if strings.HasSuffix(s.url, ":1") {
		t.Fatalf("the file's addr won over the command line: %s", s.url)
	}
}
