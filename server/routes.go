package server

import "github.com/clearancehq/clearance/tenant"

var (
	scopeDecisionWrite = []tenant.Scope{tenant.ScopeDecisionWrite}
	scopeDecisionRead  = []tenant.Scope{tenant.ScopeDecisionRead, tenant.ScopeAuditRead}
	scopePolicyWrite   = []tenant.Scope{tenant.ScopePolicyWrite}
	scopePolicyRead    = []tenant.Scope{tenant.ScopePolicyRead, tenant.ScopePolicyWrite}
	scopeAuditRead     = []tenant.Scope{tenant.ScopeAuditRead}
)

// routes is the ONE route table. Aliases are separate lines on the same handler.
func (s *Server) routes() []route {
	return []route{
		{pattern: "GET /v1/health", auth: authPublic, handle: (*Server).health},
		{pattern: "GET /metrics", auth: authPublic, handle: (*Server).metricsPage},

		// Platform extension.
		{pattern: "POST /v1/platform/orgs", auth: authPlatform, handle: (*Server).createOrg},
		{pattern: "POST /v1/platform/orgs/{orgId}/api-keys", auth: authPlatform, handle: (*Server).createAPIKey},

		// Policy bundles.
		{pattern: "POST /v1/protocol/policies/bundles", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).publishBundle},
		{pattern: "POST /v1/policies", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).publishBundle},
		{pattern: "GET /v1/protocol/policies/bundles", auth: authKey, scopes: scopePolicyRead, handle: (*Server).listBundles},
		{pattern: "GET /v1/policies", auth: authKey, scopes: scopePolicyRead, handle: (*Server).listBundles},
		{pattern: "GET /v1/protocol/policies/bundles/{version}", auth: authKey, scopes: scopePolicyRead, handle: (*Server).getBundle},
		{pattern: "GET /v1/policies/{version}", auth: authKey, scopes: scopePolicyRead, handle: (*Server).getBundle},

		// Decisions: one evaluation path behind every entry point.
		{pattern: "POST /v1/protocol/evaluate-decision", auth: authKey, scopes: scopeDecisionWrite, handle: (*Server).evaluateDecision},
		{pattern: "POST /v1/decisions/evaluate", auth: authKey, scopes: scopeDecisionWrite, deprecated: true, handle: (*Server).evaluateDecision},
		{pattern: "POST /v1/action-gate/evaluate", auth: authKey, scopes: scopeDecisionWrite, handle: (*Server).actionGate},
		{pattern: "POST /v1/orgs/{orgId}/crm/action-gate", auth: authKey, scopes: scopeDecisionWrite, handle: (*Server).crmActionGate},
		{pattern: "POST /v1/workspace-app/action-gate", auth: authKey, scopes: scopeDecisionWrite, handle: (*Server).workspaceActionGate},
		{pattern: "POST /v1/cloud/agent/extensions/verify", auth: authKey, scopes: scopeDecisionWrite, handle: (*Server).cloudAgentVerify},
		{pattern: "GET /v1/protocol/reason-codes", auth: authKey, handle: (*Server).reasonCodes},
		{pattern: "GET /v1/protocol/shadow-reports", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).shadowReport},

		// Evidence.
		{pattern: "GET /v1/dossiers/{decision_id}", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).dossierByDecision},
		{pattern: "GET /v1/protocol/dossiers/{dossierId}", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).dossier},
		{pattern: "GET /v1/protocol/audit/ledger", auth: authKey, scopes: scopeAuditRead, handle: (*Server).ledger},
		{pattern: "GET /v1/protocol/audit/ledger/verify", auth: authKey, scopes: scopeAuditRead, handle: (*Server).verifyLedger},
	}
}
