package client

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
)

// Evidence: dossiers, decision chains, human overrides, dispatches, the
// org's ledger with its signed checkpoints and proofs, proof packets and
// capsules, public share links and the reader.

// DossierByDecision reads the dossier of a decision:
// GET /v1/dossiers/{decisionId}.
func (c *Client) DossierByDecision(ctx context.Context, decisionID string, opts ...CallOption) (*Dossier, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/dossiers/"+escape(decisionID), nil, opts)
	return call[Dossier](ctx, c, r, err)
}

// Dossier reads a dossier by its id: GET /v1/protocol/dossiers/{dossierId}.
// DossierJSON returns its exact bytes, which hash to its digest.
func (c *Client) Dossier(ctx context.Context, dossierID string, opts ...CallOption) (*Dossier, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/dossiers/"+escape(dossierID), nil, opts)
	return call[Dossier](ctx, c, r, err)
}

// DossierJSON reads a dossier exactly as stored (its RFC 8785 canonical
// JSON, whose SHA-256 is the X-Clearance-Dossier-Digest):
// GET /v1/protocol/dossiers/{dossierId}.
func (c *Client) DossierJSON(ctx context.Context, dossierID string, opts ...CallOption) ([]byte, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/dossiers/"+escape(dossierID), nil, opts)
	return raw(ctx, c, r, err)
}

// ExplainDossier reads a dossier beside the explanation of its decision
// (Query("draft", …) or Query("version", …) explains how that candidate
// would have decided; needs a policy scope too):
// GET /v1/protocol/dossiers/{dossierId}?explain=true.
func (c *Client) ExplainDossier(ctx context.Context, dossierID string, opts ...CallOption) (*ExplainedDossier, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/dossiers/"+escape(dossierID), nil, opts)
	if err == nil {
		r.query.Set("explain", "true")
	}
	return call[ExplainedDossier](ctx, c, r, err)
}

// ReproduceDossier evaluates a recorded decision again under its recorded
// policy and says whether it matches:
// GET /v1/protocol/dossiers/{dossierId}/reproduce.
func (c *Client) ReproduceDossier(ctx context.Context, dossierID string, opts ...CallOption) (*Reproduction, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/dossiers/"+escape(dossierID)+"/reproduce", nil, opts)
	return call[Reproduction](ctx, c, r, err)
}

// DecisionChain reads a decision chain of the org orgID (required with
// every key): GET /v1/protocol/decision-chains/{chainId}.
func (c *Client) DecisionChain(ctx context.Context, orgID, chainID string, opts ...CallOption) (*DecisionChain, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/decision-chains/"+escape(chainID), nil, append(opts, setQuery("org_id", orgID)))
	return call[DecisionChain](ctx, c, r, err)
}

// DecisionChainByEvaluation reads the whole chain an evaluation joined:
// GET /v1/protocol/decision-chains/by-evaluation/{evaluationId}.
func (c *Client) DecisionChainByEvaluation(ctx context.Context, orgID, evaluationID string, opts ...CallOption) (*DecisionChain, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/decision-chains/by-evaluation/"+escape(evaluationID), nil, append(opts, setQuery("org_id", orgID)))
	return call[DecisionChain](ctx, c, r, err)
}

// Overrides lists the human resolutions of a dossier's decision, oldest
// first: GET /v1/protocol/dossiers/{dossierId}/overrides.
func (c *Client) Overrides(ctx context.Context, dossierID string, opts ...CallOption) (*OverrideTrail, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/dossiers/"+escape(dossierID)+"/overrides", nil, opts)
	return call[OverrideTrail](ctx, c, r, err)
}

// RecordOverride records a human resolution of a decision that was not
// ALLOW; it is evidence, never authority:
// POST /v1/protocol/dossiers/{dossierId}/overrides. It carries an
// Idempotency-Key, so it is safe to retry.
func (c *Client) RecordOverride(ctx context.Context, dossierID string, req OverrideRequest, opts ...CallOption) (*Override, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/protocol/dossiers/"+escape(dossierID)+"/overrides", req, opts)
	if err == nil {
		r.withKey()
	}
	return call[Override](ctx, c, r, err)
}

// Dispatches lists what executors reported sending under the grant of a
// dossier's decision: GET /v1/protocol/dossiers/{dossierId}/dispatches.
func (c *Client) Dispatches(ctx context.Context, dossierID string, opts ...CallOption) (*DispatchList, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/dossiers/"+escape(dossierID)+"/dispatches", nil, opts)
	return call[DispatchList](ctx, c, r, err)
}

// Ledger reads a page of the org's ledger (Query("after_seq", …),
// Query("limit", …)): GET /v1/protocol/audit/ledger.
func (c *Client) Ledger(ctx context.Context, opts ...CallOption) (*LedgerPage, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/audit/ledger", nil, opts)
	return call[LedgerPage](ctx, c, r, err)
}

// VerifyLedger checks the org's whole ledger on the server:
// GET /v1/protocol/audit/ledger/verify.
func (c *Client) VerifyLedger(ctx context.Context, opts ...CallOption) (*LedgerVerifyReport, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/audit/ledger/verify", nil, opts)
	return call[LedgerVerifyReport](ctx, c, r, err)
}

// LedgerCheckpoint reads the org's latest signed checkpoint:
// GET /v1/protocol/audit/ledger/checkpoint.
func (c *Client) LedgerCheckpoint(ctx context.Context, opts ...CallOption) (*LedgerCheckpoint, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/audit/ledger/checkpoint", nil, opts)
	return call[LedgerCheckpoint](ctx, c, r, err)
}

// SealLedger signs a checkpoint of the org's ledger now instead of waiting
// for the sealer: POST /v1/protocol/audit/ledger/checkpoints.
func (c *Client) SealLedger(ctx context.Context, opts ...CallOption) (*LedgerCheckpoint, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/protocol/audit/ledger/checkpoints", SealRequest{}, opts)
	return call[LedgerCheckpoint](ctx, c, r, err)
}

// LedgerCheckpointAt reads the signed checkpoint of a tree size:
// GET /v1/protocol/audit/ledger/checkpoints/{size}.
func (c *Client) LedgerCheckpointAt(ctx context.Context, size int64, opts ...CallOption) (*LedgerCheckpoint, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/audit/ledger/checkpoints/"+strconv.FormatInt(size, 10), nil, opts)
	return call[LedgerCheckpoint](ctx, c, r, err)
}

// InclusionProof proves the entry seq is in the tree of treeSize entries
// (0: the latest checkpoint's): GET /v1/protocol/audit/ledger/proofs/inclusion.
func (c *Client) InclusionProof(ctx context.Context, seq, treeSize int64, opts ...CallOption) (*LedgerInclusionProof, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/audit/ledger/proofs/inclusion", nil, opts)
	if err == nil {
		r.query.Set("seq", strconv.FormatInt(seq, 10))
		if treeSize > 0 {
			r.query.Set("tree_size", strconv.FormatInt(treeSize, 10))
		}
	}
	return call[LedgerInclusionProof](ctx, c, r, err)
}

// ConsistencyProof proves the tree of newSize entries extends the one of
// oldSize: GET /v1/protocol/audit/ledger/proofs/consistency.
func (c *Client) ConsistencyProof(ctx context.Context, oldSize, newSize int64, opts ...CallOption) (*LedgerConsistencyProof, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/audit/ledger/proofs/consistency", nil, opts)
	if err == nil {
		r.query.Set("old_size", strconv.FormatInt(oldSize, 10))
		r.query.Set("new_size", strconv.FormatInt(newSize, 10))
	}
	return call[LedgerConsistencyProof](ctx, c, r, err)
}

// LedgerKey is the verifier key checkpoints are signed with (a signed-note
// key, "clearance-ledger+…"): GET /.well-known/clearance-ledger-key.
func (c *Client) LedgerKey(ctx context.Context, opts ...CallOption) (string, error) {
	r, err := c.newRequest(http.MethodGet, "/.well-known/clearance-ledger-key", nil, opts)
	b, err := raw(ctx, c, r, err)
	return string(bytes.TrimSpace(b)), err
}

// ProofPacket is a dossier's offline-verifiable proof packet (the dossier,
// its ledger entry, its anchor in a signed checkpoint); orgID is required:
// GET /v1/protocol/dossiers/{dossierId}/proof-packet.
func (c *Client) ProofPacket(ctx context.Context, orgID, dossierID string, opts ...CallOption) (*ProofPacket, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/dossiers/"+escape(dossierID)+"/proof-packet", nil, append(opts, setQuery("org_id", orgID)))
	return call[ProofPacket](ctx, c, r, err)
}

// AgentActionCapsule is a dossier's Agent Action Capsule, its exact signed
// bytes (application/agent-action-capsule+json); orgID is required. The
// header X-Clearance-Class1-Verified (see Received) says the server's own
// checks passed: GET /v1/protocol/dossiers/{dossierId}/agent-action-capsule.
func (c *Client) AgentActionCapsule(ctx context.Context, orgID, dossierID string, opts ...CallOption) ([]byte, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/dossiers/"+escape(dossierID)+"/agent-action-capsule", nil, append(opts, setQuery("org_id", orgID)))
	if err == nil {
		r.header.Set("Accept", "application/agent-action-capsule+json, application/problem+json")
	}
	return raw(ctx, c, r, err)
}

// ProducerEnvelopes lists the COSE producer envelopes of a dossier's
// capsule; orgID is required:
// GET /v1/protocol/dossiers/{dossierId}/agent-action-capsule/producer-envelopes.
func (c *Client) ProducerEnvelopes(ctx context.Context, orgID, dossierID string, opts ...CallOption) (*ProducerEnvelopes, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/protocol/dossiers/"+escape(dossierID)+"/agent-action-capsule/producer-envelopes", nil, append(opts, setQuery("org_id", orgID)))
	return call[ProducerEnvelopes](ctx, c, r, err)
}

// CreateShareLink makes an expiring public link of a dossier (its Sig opens
// the public routes below): POST /v1/protocol/dossiers/{dossierId}/share-links.
func (c *Client) CreateShareLink(ctx context.Context, dossierID string, req ShareLinkRequest, opts ...CallOption) (*ShareLink, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/protocol/dossiers/"+escape(dossierID)+"/share-links", req, opts)
	return call[ShareLink](ctx, c, r, err)
}

// RevokeShareLinks revokes every share link the org made so far:
// DELETE /v1/protocol/share-links.
func (c *Client) RevokeShareLinks(ctx context.Context, opts ...CallOption) (*ShareLinkRevocation, error) {
	r, err := c.newRequest(http.MethodDelete, "/v1/protocol/share-links", nil, opts)
	return call[ShareLinkRevocation](ctx, c, r, err)
}

// SharedVerification verifies a shared dossier without a credential, by the
// link's sig; it never reveals the dossier:
// GET /v1/public/decision-dossiers/{dossierId}/verify.
func (c *Client) SharedVerification(ctx context.Context, dossierID, sig string, opts ...CallOption) (*SharedVerification, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/public/decision-dossiers/"+escape(dossierID)+"/verify", nil, append(opts, setQuery("sig", sig)))
	return call[SharedVerification](ctx, c, r, err)
}

// SharedReproduction reproduces a shared dossier's decision without a
// credential: GET /v1/public/decision-dossiers/{dossierId}/reproduce.
func (c *Client) SharedReproduction(ctx context.Context, dossierID, sig string, opts ...CallOption) (*SharedReproduction, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/public/decision-dossiers/"+escape(dossierID)+"/reproduce", nil, append(opts, setQuery("sig", sig)))
	return call[SharedReproduction](ctx, c, r, err)
}

// SharedProofBundle is a shared dossier's proof packet, through a link made
// with proof_bundle (409 ENTRY_NOT_YET_SEALED until a checkpoint covers it):
// GET /v1/public/decision-dossiers/{dossierId}/proof-bundle.
func (c *Client) SharedProofBundle(ctx context.Context, dossierID, sig string, opts ...CallOption) (*ProofPacket, error) {
	r, err := c.newRequest(http.MethodGet, "/v1/public/decision-dossiers/"+escape(dossierID)+"/proof-bundle", nil, append(opts, setQuery("sig", sig)))
	return call[ProofPacket](ctx, c, r, err)
}

// ReaderVerify checks evidence without a credential; evidence that does not
// verify is an answer with Valid false and the failed checks:
// POST /v1/reader/verify.
func (c *Client) ReaderVerify(ctx context.Context, req ReaderVerifyRequest, opts ...CallOption) (*ReaderReport, error) {
	r, err := c.newRequest(http.MethodPost, "/v1/reader/verify", req, opts)
	return call[ReaderReport](ctx, c, r, err)
}

// ReaderPage is the reader's HTML page: GET /reader.
func (c *Client) ReaderPage(ctx context.Context, opts ...CallOption) ([]byte, error) {
	r, err := c.newRequest(http.MethodGet, "/reader", nil, opts)
	if err == nil {
		r.header.Set("Accept", "text/html")
	}
	return raw(ctx, c, r, err)
}

// ConsolePage is the operator console's HTML page: GET /console. The page
// holds no data; it reads the API with the key the operator signs in with.
func (c *Client) ConsolePage(ctx context.Context, opts ...CallOption) ([]byte, error) {
	r, err := c.newRequest(http.MethodGet, "/console", nil, opts)
	if err == nil {
		r.header.Set("Accept", "text/html")
	}
	return raw(ctx, c, r, err)
}

// ConsoleAsset is a file the console page loads (app.js or app.css):
// GET /console/assets/{file}. Any other name is a 404 ROUTE_NOT_FOUND.
func (c *Client) ConsoleAsset(ctx context.Context, file string, opts ...CallOption) ([]byte, error) {
	r, err := c.newRequest(http.MethodGet, "/console/assets/"+escape(file), nil, opts)
	if err == nil {
		r.header.Set("Accept", "*/*")
	}
	return raw(ctx, c, r, err)
}
