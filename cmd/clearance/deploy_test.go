package main

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The deployment files at the repository root and under deploy/.
const (
	repoRoot     = "../.."
	dockerfile   = repoRoot + "/Dockerfile"
	dockerignore = repoRoot + "/.dockerignore"
	systemdUnit  = repoRoot + "/deploy/clearance.service"
)

// splitWords splits a command line as a shell or systemd does for plain
// words: blanks separate, single quotes keep everything, double quotes
// keep all but \" and \\, a backslash outside quotes escapes one character.
func splitWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				t.Fatalf("unclosed ' in %q", s)
			}
			w.WriteString(s[i+1 : i+1+end])
			i, inWord = i+1+end, true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				w.WriteByte(s[i])
			}
			if i == len(s) {
				t.Fatalf("unclosed \" in %q", s)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd, args string
	line      int
}

// parseDockerfile reads the instructions of a Dockerfile: comment lines
// (also inside a continuation) are dropped, a line ending in \ continues.
func parseDockerfile(t *testing.T, path string) [][]instruction {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]instruction
	var cur *instruction
	for i, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if cur == nil {
			cmd, args, _ := strings.Cut(trimmed, " ")
			cur = &instruction{cmd: strings.ToUpper(cmd), line: i + 1}
			trimmed = args
		}
		more := strings.HasSuffix(trimmed, "\\")
		cur.args = strings.TrimSpace(cur.args + " " + strings.TrimSuffix(trimmed, "\\"))
		if more {
			continue
		}
		if cur.cmd == "FROM" {
			stages = append(stages, nil)
		} else if len(stages) == 0 {
			t.Fatalf("%s:%d: %s before FROM", path, cur.line, cur.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], *cur)
		cur = nil
	}
	return stages
}

// jsonForm is an instruction's exec form (a JSON array of strings).
func jsonForm(t *testing.T, in instruction, args string) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		t.Fatalf("Dockerfile:%d: %s %s is not the exec form (a JSON array): %v", in.line, in.cmd, args, err)
	}
	return argv
}

// last is the last instruction named cmd in a stage, and whether there is one.
func last(stage []instruction, cmd string) (instruction, bool) {
	for i := len(stage) - 1; i >= 0; i-- {
		if stage[i].cmd == cmd {
			return stage[i], true
		}
	}
	return instruction{}, false
}

// goBuild is the go build command of the Dockerfile's build stage.
type goBuild struct {
	env    []string // NAME=value before go build
	flags  []string // build flags, -o and its value left out
	output string   // the -o path
	pkg    string
}

// dockerBuildCommand finds the go build in a RUN of stage and splits it.
func dockerBuildCommand(t *testing.T, stage []instruction) (goBuild, instruction) {
	t.Helper()
	for _, in := range stage {
		if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
			continue
		}
		words := splitWords(t, in.args)
		for len(words) > 0 && strings.HasPrefix(words[0], "--") { // RUN's own options (--mount)
			words = words[1:]
		}
		if i := slices.Index(words, "&&"); i >= 0 {
			words = words[:i]
		}
		var b goBuild
		for len(words) > 0 && strings.Contains(words[0], "=") {
			b.env, words = append(b.env, words[0]), words[1:]
		}
		if len(words) < 3 || words[0] != "go" || words[1] != "build" {
			t.Fatalf("Dockerfile:%d: want [NAME=value...] go build ...; got %q", in.line, words)
		}
		words = words[2:]
		for i := 0; i < len(words); i++ {
			switch {
			case words[i] == "-o" && i+1 < len(words):
				b.output = words[i+1]
				i++
			case words[i] == "-ldflags" && i+1 < len(words):
				b.flags = append(b.flags, words[i], words[i+1])
				i++
			case strings.HasPrefix(words[i], "-"):
				b.flags = append(b.flags, words[i])
			case b.pkg == "":
				b.pkg = words[i]
			default:
				t.Fatalf("Dockerfile:%d: go build builds more than one package: %q", in.line, words)
			}
		}
		return b, in
	}
	t.Fatal("Dockerfile: the build stage runs no go build")
	return goBuild{}, instruction{}
}

// The Dockerfile keeps its promises: a Go build stage with a module cache,
// CGO off, -trimpath, a stripped binary; a distroless (or empty) final
// stage running as a numeric non-root user; the server on 0.0.0.0:8080
// with its data on the /data volume; a health check by the binary itself.
// The binary built with exactly the Dockerfile's environment and flags is
// static: no interpreter, no dynamic section, so it runs on an image
// without a libc; and it checks itself healthy by the image's settings.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, dockerfile)
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: %d stages, want a build stage and a final one", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	from := strings.Fields(build[0].args)
	if len(from) != 3 || from[0] != "golang:1.26" || !strings.EqualFold(from[1], "AS") {
		t.Fatalf("Dockerfile:%d: the build stage is FROM %s, want golang:1.26 AS <name>", build[0].line, build[0].args)
	}
	stageName := from[2]
	if img := final[0].args; img != "gcr.io/distroless/static-debian12:nonroot" && img != "scratch" {
		t.Fatalf("Dockerfile:%d: the final stage is FROM %s, want a distroless static image or scratch", final[0].line, img)
	}

	b, run := dockerBuildCommand(t, build)
	if !strings.Contains(run.args, "--mount=type=cache,target=/go/pkg/mod") {
		t.Errorf("Dockerfile:%d: the build has no module cache mount", run.line)
	}
	if !slices.Contains(b.env, "CGO_ENABLED=0") {
		t.Errorf("Dockerfile:%d: the build does not set CGO_ENABLED=0: %q", run.line, b.env)
	}
	if !slices.Contains(b.flags, "-trimpath") || !slices.Contains(b.flags, "-ldflags") || b.flags[slices.Index(b.flags, "-ldflags")+1] != "-s -w" {
		t.Errorf("Dockerfile:%d: build flags %q, want -trimpath and -ldflags \"-s -w\"", run.line, b.flags)
	}
	if b.pkg != "./cmd/clearance" || b.output == "" {
		t.Errorf("Dockerfile:%d: go build -o %q %q, want the server ./cmd/clearance", run.line, b.output, b.pkg)
	}

	user, ok := last(final, "USER")
	uid, _, _ := strings.Cut(user.args, ":")
	if n, err := strconv.Atoi(uid); !ok || err != nil || n == 0 {
		t.Errorf("the final stage runs as USER %q: want a numeric user that is not root", user.args)
	}
	copiedBinary := false
	for _, in := range final {
		w := strings.Fields(in.args)
		if in.cmd == "COPY" && slices.Contains(w, "--from="+stageName) && len(w) >= 2 && w[len(w)-2] == b.output && w[len(w)-1] == "/clearance" {
			copiedBinary = true
		}
		if in.cmd == "COPY" && slices.Contains(w, "--from="+stageName) && w[len(w)-1] == "/data" && !slices.Contains(w, "--chown="+user.args) {
			t.Errorf("Dockerfile:%d: /data is not owned by the server's user %s", in.line, user.args)
		}
	}
	if !copiedBinary {
		t.Errorf("the final stage does not copy %s from stage %s to /clearance", b.output, stageName)
	}

	env := map[string]string{}
	for _, in := range final {
		if in.cmd == "ENV" {
			for _, w := range splitWords(t, in.args) {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					t.Fatalf("Dockerfile:%d: ENV %s: want NAME=value", in.line, in.args)
				}
				env[k] = v
			}
		}
	}
	expose, _ := last(final, "EXPOSE")
	volume, _ := last(final, "VOLUME")
	if env["CLEARANCE_ADDR"] != "0.0.0.0:"+expose.args || expose.args != "8080" {
		t.Errorf("the image listens on CLEARANCE_ADDR=%q and exposes %q, want 0.0.0.0:8080 and 8080", env["CLEARANCE_ADDR"], expose.args)
	}
	if env["CLEARANCE_DATA"] != "/data" || !slices.Equal(jsonForm(t, volume, volume.args), []string{"/data"}) {
		t.Errorf("the image keeps its data in CLEARANCE_DATA=%q, volume %s; want /data, the volume", env["CLEARANCE_DATA"], volume.args)
	}
	hc, _ := last(final, "HEALTHCHECK")
	_, hcCmd, _ := strings.Cut(hc.args, "CMD ")
	if !slices.Equal(jsonForm(t, hc, hcCmd), []string{"/clearance", "healthcheck"}) {
		t.Errorf("Dockerfile:%d: HEALTHCHECK %s, want CMD [\"/clearance\", \"healthcheck\"]", hc.line, hc.args)
	}
	entry, _ := last(final, "ENTRYPOINT")
	cmd, _ := last(final, "CMD")
	if !slices.Equal(jsonForm(t, entry, entry.args), []string{"/clearance"}) || !slices.Equal(jsonForm(t, cmd, cmd.args), []string{"serve"}) {
		t.Errorf("ENTRYPOINT %s CMD %s, want [\"/clearance\"] [\"serve\"]", entry.args, cmd.args)
	}

	if runtime.GOOS != "linux" {
		t.Skip("the static build is checked on Linux, where the image's binary is built")
	}
	if testing.Short() {
		t.Skip("-short: the static build compiles every package again")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out := filepath.Join(t.TempDir(), "clearance")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	gb := exec.CommandContext(ctx, gobin, append(append([]string{"build"}, b.flags...), "-o", out, b.pkg)...)
	gb.Dir, gb.Env = repoRoot, append(os.Environ(), b.env...)
	if output, err := gb.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", gb.Args, err, output)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the image's binary is not static: it has a %v program header", p.Type)
		}
	}
	if f.Section(".dynamic") != nil || f.Section(".interp") != nil || f.Section(".symtab") != nil {
		t.Error("the image's binary has a .dynamic, .interp or (not stripped) .symtab section")
	}

	// The binary's own view of the image's environment: it serves on
	// 0.0.0.0:8080 with its data in /data, and the health check asks
	// 127.0.0.1:8080.
	environ := []string{}
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	check := exec.CommandContext(ctx, out, "serve", "--check-config")
	check.Env = append(envWithoutClearance(), environ...)
	printed, err := check.Output()
	if err != nil {
		t.Fatalf("serve --check-config with the image's environment: %v", err)
	}
	got := parseEffective(t, printed)
	if got["addr"] != (effective{"0.0.0.0:8080", "env CLEARANCE_ADDR"}) || got["data"] != (effective{"/data", "env CLEARANCE_DATA"}) {
		t.Errorf("in the image, serve runs with addr %+v, data %+v", got["addr"], got["data"])
	}
	hcRun := exec.CommandContext(ctx, out, "healthcheck", "--timeout", "1ms")
	hcRun.Env = check.Env
	msg, _ := hcRun.CombinedOutput()
	if !strings.Contains(string(msg), "http://127.0.0.1:8080/v1/health") {
		t.Errorf("in the image, the health check asks: %s", msg)
	}
}

// envWithoutClearance is this process's environment without CLEARANCE_
// variables.
func envWithoutClearance() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLEARANCE_") {
			out = append(out, kv)
		}
	}
	return out
}

// dockerignorePattern compiles a .dockerignore line as Docker reads it:
// relative to the context root, * and ? within one path element, ** any
// number of them; a match on a directory excludes what is under it.
func dockerignorePattern(t *testing.T, p string) *regexp.Regexp {
	t.Helper()
	if strings.HasPrefix(p, "!") {
		t.Fatalf(".dockerignore: exceptions (%s) are not understood by this test", p)
	}
	p = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/")
	var re strings.Builder
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**/"):
			re.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			re.WriteString(".*")
			i++
		case p[i] == '*':
			re.WriteString("[^/]*")
		case p[i] == '?':
			re.WriteString("[^/]")
		default:
			re.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	return regexp.MustCompile("^" + re.String() + "(/.*)?$")
}

// .dockerignore keeps the history and local state out of the build
// context, and nothing the build needs: no Go source, go.mod or go.sum,
// and nothing a package embeds.
func TestDockerignore(t *testing.T) {
	f, err := os.Open(dockerignore)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var patterns []*regexp.Regexp
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, dockerignorePattern(t, line))
		}
	}
	excluded := func(path string) bool {
		return slices.ContainsFunc(patterns, func(re *regexp.Regexp) bool { return re.MatchString(path) })
	}
	for _, p := range []string{".git", "clearance-data", "sdk/typescript/node_modules/x/index.js"} {
		if !excluded(p) {
			t.Errorf(".dockerignore does not exclude %s", p)
		}
	}
	embedded := regexp.MustCompile(`(?m)^//go:embed (.+)$`)
	err = filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if excluded(rel) {
			if !d.IsDir() && (strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
				t.Errorf(".dockerignore excludes %s, which the build needs", rel)
			}
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range embedded.FindAllStringSubmatch(string(src), -1) {
			for _, pat := range strings.Fields(m[1]) {
				files, _ := filepath.Glob(filepath.Join(filepath.Dir(path), pat))
				for _, file := range files {
					r, _ := filepath.Rel(repoRoot, file)
					if excluded(filepath.ToSlash(r)) {
						t.Errorf(".dockerignore excludes %s, which %s embeds", r, rel)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// unitEntry is one Key=Value of a systemd unit.
type unitEntry struct {
	key, value string
	line       int
}

// parseUnit reads a systemd unit file: [Section] headers, Key=Value lines,
// # and ; comments, a trailing \ joining the next line with a space.
func parseUnit(t *testing.T, path string) map[string][]unitEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string][]unitEntry{}
	section := ""
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		line, start := strings.TrimSpace(lines[i]), i+1
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			continue
		}
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			next := strings.TrimSpace(lines[i])
			if next != "" && (next[0] == '#' || next[0] == ';') {
				continue // a comment inside a continuation is skipped
			}
			line = strings.TrimSuffix(line, "\\") + " " + next
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s:%d: not Key=Value in a section: %q", path, start, line)
		}
		sections[section] = append(sections[section], unitEntry{strings.TrimSpace(k), strings.TrimSpace(v), start})
	}
	return sections
}

// unitValues is every value of key in entries (a key may repeat).
func unitValues(entries []unitEntry, key string) []string {
	var out []string
	for _, e := range entries {
		if e.key == key {
			out = append(out, e.value)
		}
	}
	return out
}

// The systemd unit is hardened, and its ExecStart is exactly a command
// clearance serve accepts: run with --check-config (the unit's config file
// read from the example in deploy/), it exits 0 and serves from the state
// directory. Where systemd-analyze exists, it verifies the unit and rates
// its exposure at most 2.0 ("OK").
func TestSystemdUnit(t *testing.T) {
	unit := parseUnit(t, systemdUnit)
	service := unit["Service"]
	for key, want := range map[string]string{
		"DynamicUser": "yes", "StateDirectory": "clearance", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
		"ProtectHome": "yes", "PrivateTmp": "yes", "PrivateDevices": "yes", "ProtectKernelTunables": "yes",
		"ProtectKernelModules": "yes", "ProtectKernelLogs": "yes", "ProtectControlGroups": "yes",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX", "CapabilityBoundingSet": "", "AmbientCapabilities": "",
		"MemoryDenyWriteExecute": "yes", "LockPersonality": "yes", "RestrictNamespaces": "yes", "RestrictSUIDSGID": "yes",
		"Restart": "on-failure", "SystemCallArchitectures": "native", "SystemCallErrorNumber": "EPERM",
	} {
		if got := unitValues(service, key); !slices.Equal(got, []string{want}) {
			t.Errorf("%s: %s=%q, want %q", systemdUnit, key, got, want)
		}
	}
	if !slices.Contains(unitValues(service, "SystemCallFilter"), "@system-service") {
		t.Errorf("%s: no SystemCallFilter=@system-service", systemdUnit)
	}

	execStart := unitValues(service, "ExecStart")
	if len(execStart) != 1 {
		t.Fatalf("%s: %d ExecStart lines, want 1", systemdUnit, len(execStart))
	}
	argv := splitWords(t, strings.TrimLeft(execStart[0], "@-:+!")) // systemd's prefixes
	if len(argv) < 2 || !filepath.IsAbs(argv[0]) || filepath.Base(argv[0]) != "clearance" || argv[1] != "serve" {
		t.Fatalf("%s: ExecStart=%s, want /…/clearance serve …", systemdUnit, execStart[0])
	}
	args := slices.Clone(argv[2:])
	// option is the value of --name in args, and where it is: args[at] is
	// "--name=value" when joined, else args[at] is the value.
	option := func(name string) (value string, at int, joined bool) {
		for i, a := range args {
			if a == "--"+name && i+1 < len(args) {
				return args[i+1], i + 1, false
			}
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v, i, true
			}
		}
		return "", -1, false
	}
	cfg, cfgAt, joined := option("config")
	if cfg != "/etc/clearance/clearance.yaml" {
		t.Errorf("ExecStart's --config is %q, want /etc/clearance/clearance.yaml", cfg)
	}
	stateDir := "/var/lib/" + unitValues(service, "StateDirectory")[0]
	if data, _, _ := option("data"); data != stateDir {
		t.Errorf("ExecStart's --data is %q, want the state directory %s", data, stateDir)
	}
	// The file the unit reads is installed from the example in deploy/.
	switch {
	case cfgAt >= 0 && joined:
		args[cfgAt] = "--config=" + exampleConfig
	case cfgAt >= 0:
		args[cfgAt] = exampleConfig
	}
	environ := []string{}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "CLEARANCE_") {
			environ = append(environ, name+"=")
		}
	}
	code, out, errOut := runCLI(t, environ, append(append([]string{"serve"}, args...), "--check-config")...)
	if code != 0 {
		t.Fatalf("clearance serve %q --check-config: exit %d: %s", args, code, errOut)
	}
	if got := parseEffective(t, []byte(out)); got["data"] != (effective{stateDir, fromFlag}) {
		t.Errorf("the unit's server keeps its data in %+v, want %s", got["data"], stateDir)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit is not verified by systemd")
	}
	// verify needs ExecStart's program to exist: point it at the binary
	// under test, in a copy of the unit.
	data, err := os.ReadFile(systemdUnit)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "clearance.service")
	if err := os.WriteFile(copyPath, []byte(strings.Replace(string(data), "ExecStart="+argv[0], "ExecStart="+binary(t), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	verify := exec.CommandContext(ctx, analyze, "verify", "--man=no", copyPath)
	if out, err := verify.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	security := exec.CommandContext(ctx, analyze, "security", "--offline=yes", "--threshold=20", copyPath)
	if out, err := security.CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze security: the exposure is above 2.0 (%v):\n%s", err, out)
	}
}
