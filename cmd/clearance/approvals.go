package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/cmd/clearance/internal/keyfile"
)

// approvalFlags configure the approval services of managed escalation.
type approvalFlags struct {
	url, credentialFile, issuer string // the default service
	configFile                  string // per-org services (JSON)
}

// approvalConfig is the --approval-config file: a default service and
// per-org ones; a credential is always read from a file of its own (0600),
// never written in the config.
type approvalConfig struct {
	Default *serviceConfig           `json:"default"`
	Orgs    map[string]serviceConfig `json:"orgs"`
}

type serviceConfig struct {
	BaseURL        string `json:"base_url"`
	CredentialFile string `json:"credential_file"`
	Issuer         string `json:"issuer"` // empty: the base URL
	// Disabled turns approvals off for the org even with a default.
	Disabled bool `json:"disabled"`
}

// directory builds the approval services the flags name; nil when none.
// Every endpoint is checked now, so a misconfiguration stops the server
// at startup rather than at its first escalation.
func (f approvalFlags) directory() (approval.Directory, error) {
	var cfg approvalConfig
	if f.configFile != "" {
		raw, err := os.ReadFile(f.configFile)
		if err != nil {
			return nil, fmt.Errorf("approval config: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return nil, fmt.Errorf("approval config %s: %w", f.configFile, err)
		}
	}
	if f.url != "" {
		if cfg.Default != nil {
			return nil, fmt.Errorf("--approval-url and a default in --approval-config: give one")
		}
		cfg.Default = &serviceConfig{BaseURL: f.url, CredentialFile: f.credentialFile, Issuer: f.issuer}
	} else if f.credentialFile != "" || f.issuer != "" {
		return nil, fmt.Errorf("--approval-credential-file and --approval-issuer need --approval-url")
	}
	if cfg.Default == nil && len(cfg.Orgs) == 0 {
		return nil, nil
	}
	var dir approval.Static
	if cfg.Default != nil {
		ep, err := cfg.Default.endpoint()
		if err != nil {
			return nil, fmt.Errorf("default approval service: %w", err)
		}
		dir.Default = ep
	}
	dir.Orgs = make(map[string]approval.Endpoint, len(cfg.Orgs))
	for org, c := range cfg.Orgs {
		if c.Disabled {
			dir.Orgs[org] = approval.Endpoint{}
			continue
		}
		ep, err := c.endpoint()
		if err != nil {
			return nil, fmt.Errorf("approval service of org %s: %w", org, err)
		}
		dir.Orgs[org] = ep
	}
	if err := dir.Validate(); err != nil {
		return nil, err
	}
	return dir, nil
}

func (c serviceConfig) endpoint() (approval.Endpoint, error) {
	if c.BaseURL == "" || c.CredentialFile == "" {
		return approval.Endpoint{}, fmt.Errorf("a base URL and a credential file are required")
	}
	cred, err := keyfile.ReadSecret(c.CredentialFile)
	if err != nil {
		return approval.Endpoint{}, fmt.Errorf("credential file: %w", err)
	}
	iss := c.Issuer
	if iss == "" {
		iss = c.BaseURL
	}
	return approval.Endpoint{BaseURL: c.BaseURL, Credential: cred, Issuer: iss}, nil
}
