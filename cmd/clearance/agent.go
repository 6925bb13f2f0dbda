package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/clearancehq/clearance/client"
	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
	"github.com/clearancehq/clearance/grant"
	"github.com/clearancehq/clearance/internal/canon"
	"github.com/clearancehq/clearance/internal/strictjson"
)

// The agent's commands: an agent key, a signed intent, a guarded cycle
// from the shell.

const agentKeyUsage = `usage: clearance keys agent new [--out agent.key] [--register] [--server URL] [--api-key KEY]
  a new Ed25519 agent key: the private key as PEM PKCS#8 (0600) in --out, its kid and
  public JWK printed as JSON (the body POST /v1/execution/agent-keys takes); with
  --register, registered with the org of --api-key (env CLEARANCE_API_KEY)
`

// keysAgent handles `clearance keys agent new`.
func keysAgent(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, agentKeyUsage)
		return 0
	}
	if len(args) < 1 || args[0] != "new" {
		fmt.Fprint(stderr, agentKeyUsage)
		return 2
	}
	fs := flag.NewFlagSet("keys agent new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "agent.key", "file to create for the private key (never replaced)")
	register := fs.Bool("register", false, "register the public key with the org of --api-key")
	conn := connFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "clearance keys agent new: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	k, err := grant.NewKey(rand.Reader)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: %v\n", err)
		return 1
	}
	if err := writeAgentKey(*out, k); err != nil {
		fmt.Fprintf(stderr, "clearance: %v\n", err)
		return 1
	}
	reg := client.AgentKeyRegistration(k)
	if *register {
		c, err := conn.client()
		if err != nil {
			fmt.Fprintf(stderr, "clearance: %v\n", err)
			return 2
		}
		if _, err := c.RegisterKey(ctx, client.AgentKeys, reg); err != nil {
			fmt.Fprintf(stderr, "clearance: the key is in %s but was not registered: %v\n", *out, err)
			return 1
		}
	}
	return writeJSONLine(stdout, stderr, map[string]any{"kid": reg.Kid, "public_jwk": reg.PublicJwk,
		"key_file": *out, "registered": *register})
}

// writeAgentKey writes k as PEM PKCS#8, the form every JOSE library and
// both SDKs read, to a new 0600 file.
func writeAgentKey(path string, k grant.Key) error {
	der, err := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(k.Seed()))
	if err != nil {
		return err
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("agent key: %w", err)
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// conn is where the agent commands reach the server, and as whom.
type conn struct{ server, apiKey *string }

func connFlags(fs *flag.FlagSet) conn {
	return conn{
		server: fs.String("server", env("CLEARANCE_SERVER", "http://127.0.0.1:8080"), "server URL (env CLEARANCE_SERVER)"),
		apiKey: fs.String("api-key", "", "the org's API key (env CLEARANCE_API_KEY; the flag shows in the process list)"),
	}
}

func (c conn) client() (*client.Client, error) {
	key := *c.apiKey
	if key == "" {
		key = os.Getenv("CLEARANCE_API_KEY")
	}
	if key == "" {
		return nil, errors.New("no API key: set CLEARANCE_API_KEY or --api-key")
	}
	return client.New(*c.server, key, client.WithUserAgent("clearance-cli/"+client.Version))
}

const intentUsage = `usage: clearance intent sign [--key-file agent.key] [--org ORG_ID] [FILE|-]
  reads an intent (JSON, from FILE or stdin), fills what the agent owns when it is missing
  (org_id from --org, intent_id, nonce, issued_at now, escalation mode NONE) and prints the
  compact JWS of its RFC 8785 form, signed with the agent key: the signed_intent of
  POST /v1/authority/enforce-and-bind
`

// intentCmd handles `clearance intent sign`.
func intentCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, intentUsage)
		return 0
	}
	if len(args) < 1 || args[0] != "sign" {
		fmt.Fprint(stderr, intentUsage)
		return 2
	}
	fs := flag.NewFlagSet("intent sign", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keyFile := fs.String("key-file", env("CLEARANCE_AGENT_KEY_FILE", "agent.key"), "the agent's private key (env CLEARANCE_AGENT_KEY_FILE)")
	org := fs.String("org", env("CLEARANCE_ORG_ID", ""), "org_id, when the intent has none (env CLEARANCE_ORG_ID)")
	if err := fs.Parse(args[1:]); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 1 {
		fmt.Fprint(stderr, intentUsage)
		return 2
	}
	k, err := keyfile.LoadFile(*keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: agent key: %v\n", err)
		return 1
	}
	name := fs.Arg(0)
	if name == "" {
		name = "-"
	}
	raw, err := readInput(name)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: %v\n", err)
		return 1
	}
	var intent map[string]any
	if err := strictjson.Decode(raw, &intent, strictjson.Options{}); err != nil {
		fmt.Fprintf(stderr, "clearance: the intent is not a JSON object: %v\n", err)
		return 1
	}
	fillIntent(intent, *org, time.Now())
	payload, err := canon.Marshal(intent)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: %v\n", err)
		return 1
	}
	jws, err := grant.SignIntent(k, payload)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, jws)
	return 0
}

// fillIntent sets what the agent owns and the intent leaves out.
func fillIntent(in map[string]any, org string, now time.Time) {
	setDefault := func(k string, v any) {
		if _, ok := in[k]; !ok {
			in[k] = v
		}
	}
	if org != "" {
		setDefault("org_id", org)
	}
	setDefault("intent_id", "intent-"+randomToken())
	setDefault("nonce", randomToken())
	setDefault("issued_at", now.UTC().Format(time.RFC3339))
	setDefault("escalation", map[string]any{"mode": "NONE"})
}

func randomToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x", b)
}

const cycleUsage = `usage: clearance cycle [--key-file agent.key] [--org ORG_ID] [--server URL] --intent FILE -- COMMAND [ARG…]
  the guarded cycle from a shell: sign the intent (as clearance intent sign), enforce and bind,
  claim the grant, run COMMAND only when the claim says should_execute, and finalize:
  COMMITTED when it exits 0, FAILED when it exits otherwise, INDETERMINATE when it is killed
  by a signal, the cycle is interrupted (SIGINT, SIGTERM) or it outlives the claim lease
  (less 3 s kept for finalizing).
  COMMAND gets CLEARANCE_GRANT_ID, CLEARANCE_INTENT_HASH, CLEARANCE_CLAIM_ATTESTATION and
  CLEARANCE_EFFECT_EVIDENCE_FILE: JSON {"kind","status","effect_digest"} written there is sent
  as the effect evidence. The API key comes from CLEARANCE_API_KEY (or --api-key).
  Prints a JSON summary on stdout. Exit status: 0 committed; COMMAND's own status when it
  failed; 3 no grant (the decision was not ALLOW in ENFORCEMENT: COMMAND did not run); 4 the
  claim was refused or left no time to run (did not run); 5 indeterminate; 1 any other error.
`

// cycleResult is what `clearance cycle` prints.
type cycleResult struct {
	Outcome     string   `json:"outcome,omitempty"`
	Mode        string   `json:"mode,omitempty"`
	ReasonCodes []string `json:"reason_codes,omitempty"`
	DossierID   string   `json:"dossier_id,omitempty"`
	GrantID     string   `json:"grant_id,omitempty"`
	Ran         bool     `json:"ran"`
	Finalized   string   `json:"finalized,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// cycle handles `clearance cycle`.
func cycle(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, cycleUsage)
		return 0
	}
	fs := flag.NewFlagSet("cycle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, cycleUsage) }
	keyFile := fs.String("key-file", env("CLEARANCE_AGENT_KEY_FILE", "agent.key"), "the agent's private key (env CLEARANCE_AGENT_KEY_FILE)")
	org := fs.String("org", env("CLEARANCE_ORG_ID", ""), "org_id, when the intent has none (env CLEARANCE_ORG_ID)")
	intentFile := fs.String("intent", "", "the intent, JSON (required; - for stdin)")
	conn := connFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	command := fs.Args()
	if *intentFile == "" || len(command) == 0 {
		fmt.Fprint(stderr, cycleUsage)
		return 2
	}
	c, err := conn.client()
	if err != nil {
		fmt.Fprintf(stderr, "clearance: %v\n", err)
		return 2
	}
	k, err := keyfile.LoadFile(*keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: agent key: %v\n", err)
		return 1
	}
	raw, err := readInput(*intentFile)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: %v\n", err)
		return 1
	}
	var intent client.ExecutionIntent
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&intent); err != nil {
		fmt.Fprintf(stderr, "clearance: intent: %v\n", err)
		return 1
	}
	orgID := *org
	if orgID == "" {
		orgID = intent.OrgId.String()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	agent := &client.Agent{Client: c, Key: k, OrgID: orgID}
	evidenceDir, err := os.MkdirTemp("", "clearance-cycle-")
	if err != nil {
		fmt.Fprintf(stderr, "clearance: %v\n", err)
		return 1
	}
	defer os.RemoveAll(evidenceDir)
	evidenceFile := filepath.Join(evidenceDir, "effect-evidence.json")
	exitStatus := 0
	cyc, err := agent.Run(ctx, intent, func(actx context.Context, claim *client.ClaimResponse) (*client.EffectEvidence, error) {
		cmd := exec.CommandContext(actx, command[0], command[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stderr, stderr
		cmd.Env = append(os.Environ(), "CLEARANCE_GRANT_ID="+claim.GrantId,
			"CLEARANCE_INTENT_HASH="+attestedIntentHash(claim.ClaimAttestation),
			"CLEARANCE_CLAIM_ATTESTATION="+claim.ClaimAttestation, "CLEARANCE_EFFECT_EVIDENCE_FILE="+evidenceFile)
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					// Killed part way: whatever it did may have taken effect.
					return nil, fmt.Errorf("%w: the command was killed by %v", client.ErrIndeterminate, ws.Signal())
				}
				exitStatus = ee.ExitCode()
			}
			return nil, err
		}
		return readEvidence(evidenceFile, stderr)
	})
	res := cycleResult{Ran: cyc.Ran, Finalized: string(cyc.Outcome)}
	if d := cyc.Decision; d != nil {
		res.Outcome, res.Mode, res.ReasonCodes, res.DossierID = string(d.Outcome), string(d.Mode), d.ReasonCodes, d.DossierId.String()
		if d.GrantId != nil {
			res.GrantID = d.GrantId.String()
		}
	}
	granted := cyc.Decision != nil && cyc.Decision.ExecutionToken != nil && *cyc.Decision.ExecutionToken != ""
	code := 0
	switch {
	case cyc.Outcome == client.ExecutionFinalizeRequestOutcomeINDETERMINATE:
		code = 5
	case cyc.Decision != nil && !granted:
		code = 3
	case granted && !cyc.Ran:
		code = 4 // the claim was refused, or came back too late to start
	case cyc.Outcome == client.ExecutionFinalizeRequestOutcomeFAILED:
		code = max(exitStatus, 1)
	case err != nil:
		code = 1
	}
	if err != nil {
		res.Error = err.Error()
	}
	writeJSONLine(stdout, stderr, res)
	return code
}

// attestedIntentHash reads the intent hash a claim attestation binds, for
// the command's environment (the command may verify the attestation
// itself).
func attestedIntentHash(attestation string) string {
	parts := strings.Split(attestation, ".")
	if len(parts) != 3 {
		return ""
	}
	var a client.ClaimAttestationClaims
	if raw, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil && json.Unmarshal(raw, &a) == nil {
		return a.Binding.IntentHash
	}
	return ""
}

// readEvidence reads the effect evidence the command wrote, if any.
func readEvidence(path string, stderr io.Writer) (*client.EffectEvidence, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ev client.EffectEvidence
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		// The command succeeded: its evidence is unreadable, not its effect.
		fmt.Fprintf(stderr, "clearance: the effect evidence is not sent: %v\n", err)
		return nil, nil
	}
	return &ev, nil
}

func writeJSONLine(stdout, stderr io.Writer, v any) int {
	out, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(stderr, "clearance: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, string(out))
	return 0
}
