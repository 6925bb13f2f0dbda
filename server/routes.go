package server

import (
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/tenant"
)

var (
	scopeDecisionWrite = []tenant.Scope{tenant.ScopeDecisionWrite}
	scopeDecisionRead  = []tenant.Scope{tenant.ScopeDecisionRead, tenant.ScopeAuditRead}
	scopePolicyWrite   = []tenant.Scope{tenant.ScopePolicyWrite}
	scopePolicyRead    = []tenant.Scope{tenant.ScopePolicyRead, tenant.ScopePolicyWrite}
	// A dry run is for policy authors and for callers that may decide.
	scopeDryRun     = []tenant.Scope{tenant.ScopePolicyRead, tenant.ScopePolicyWrite, tenant.ScopeDecisionWrite}
	scopeAuditRead  = []tenant.Scope{tenant.ScopeAuditRead}
	scopeAuditWrite = []tenant.Scope{tenant.ScopeAuditWrite} // sealing the ledger now
	scopeExecRead   = []tenant.Scope{tenant.ScopeDecisionWrite, tenant.ScopeDecisionRead}
	// Cancelling an escalation: whoever may decide, or a key that may only
	// cancel (the operator console's).
	scopeCancelEscalation = []tenant.Scope{tenant.ScopeDecisionWrite, tenant.ScopeEscalationWrite}
	scopeReconcileRead    = []tenant.Scope{tenant.ScopeAuditRead, tenant.ScopeDecisionRead}
	scopeReconcile        = []tenant.Scope{tenant.ScopeAuditWrite, tenant.ScopeDecisionWrite}
	// Budgets are read by the agents that spend them, their auditors and
	// the policy authors who set them.
	scopeSpendRead   = []tenant.Scope{tenant.ScopeDecisionRead, tenant.ScopeDecisionWrite, tenant.ScopeAuditRead, tenant.ScopePolicyRead}
	scopeOverride    = []tenant.Scope{tenant.ScopeAuditWrite}
	scopeShareRevoke = []tenant.Scope{tenant.ScopeAuditWrite} // making and revoking public links
	scopeExportWrite = []tenant.Scope{tenant.ScopeAuditWrite}
	scopeExportRead  = []tenant.Scope{tenant.ScopeAuditRead, tenant.ScopeAuditWrite}
	scopeIntegration = []tenant.Scope{tenant.ScopeIntegrationWrite}
	scopeAutomation  = []tenant.Scope{tenant.ScopeAutomation}
	// Personal data: what is personal and erasing it are the org's own
	// administration (org:* only); reading the setting is an auditor's.
	scopePrivacyWrite = []tenant.Scope{tenant.ScopeOrgAll}
	scopePrivacyRead  = []tenant.Scope{tenant.ScopeAuditRead}
	// Federated decision envelopes are for the callers that decide, and for
	// auditors who hand evidence out (as share links).
	scopeFederationIssue = []tenant.Scope{tenant.ScopeDecisionWrite, tenant.ScopeAuditWrite}

	agentKeys    = keyRoutes{kind: registry.KindAgent}
	providerKeys = keyRoutes{kind: registry.KindProvider}
)

// routes is the ONE route table. Aliases are separate lines on the same handler.
func (s *Server) routes() []route {
	return []route{
		{pattern: "GET /v1/health", auth: authPublic, handle: (*Server).health},
		// Metrics count every org's traffic: the platform key only here;
		// Server.MetricsHandler serves them on a private listener of its own.
		{pattern: "GET /metrics", auth: authPlatform, handle: (*Server).metricsPage},

		// Platform extension.
		{pattern: "POST /v1/platform/orgs", auth: authPlatform, handle: (*Server).createOrg},
		{pattern: "POST /v1/platform/orgs/{orgId}/api-keys", auth: authPlatform, handle: (*Server).createAPIKey},
		{pattern: "GET /v1/platform/orgs", auth: authPlatform, handle: (*Server).listOrgs},
		{pattern: "GET /v1/platform/orgs/{orgId}/api-keys", auth: authPlatform, handle: (*Server).listAPIKeys},
		{pattern: "DELETE /v1/platform/orgs/{orgId}/api-keys/{keyId}", auth: authPlatform, handle: (*Server).revokeAPIKey},

		// Platform-operator analytics.
		{pattern: "PUT /v1/analytics/growth-reports/consent/{orgId}", auth: authPlatform, handle: (*Server).putConsent},
		{pattern: "POST /v1/analytics/growth-reports/blast-radius/{month}", auth: authPlatform, handle: (*Server).freezeBlastRadius},
		{pattern: "GET /v1/analytics/growth-scorecard", auth: authPlatform, handle: (*Server).growthScorecard},
		{pattern: "PUT /v1/analytics/growth-scorecard/orgs/{orgId}", auth: authPlatform, handle: (*Server).classifyOrg},
		{pattern: "POST /v1/analytics/growth-scorecard/baselines/{name}", auth: authPlatform, handle: (*Server).freezeBaseline},
		{pattern: "GET /.well-known/clearance-reporting-jwks.json", auth: authPublic, handle: (*Server).reportingJWKS},

		// Policy bundles.
		{pattern: "POST /v1/protocol/policies/bundles", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).publishBundle},
		{pattern: "POST /v1/policies", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).publishBundle},
		{pattern: "GET /v1/protocol/policies/bundles", auth: authKey, scopes: scopePolicyRead, handle: (*Server).listBundles},
		{pattern: "GET /v1/policies", auth: authKey, scopes: scopePolicyRead, handle: (*Server).listBundles},
		{pattern: "GET /v1/protocol/policies/bundles/{version}", auth: authKey, scopes: scopePolicyRead, handle: (*Server).getBundle},
		{pattern: "GET /v1/policies/{version}", auth: authKey, scopes: scopePolicyRead, handle: (*Server).getBundle},
		{pattern: "POST /v1/protocol/policies/bundles/{version}/activate", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).activateBundle},
		{pattern: "POST /v1/policies/{version}/activate", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).activateBundle},

		// Policy lifecycle: drafts, diffs, dry runs, replays.
		{pattern: "GET /v1/policies/drafts", auth: authKey, scopes: scopePolicyRead, handle: (*Server).listDrafts},
		{pattern: "PUT /v1/policies/drafts/{name}", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).putDraft},
		{pattern: "GET /v1/policies/drafts/{name}", auth: authKey, scopes: scopePolicyRead, handle: (*Server).getDraft},
		{pattern: "DELETE /v1/policies/drafts/{name}", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).deleteDraft},
		{pattern: "POST /v1/policies/drafts/{name}/validate", auth: authKey, scopes: scopePolicyRead, handle: (*Server).validateDraft},
		{pattern: "POST /v1/policies/drafts/{name}/promote", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).promoteDraft},
		{pattern: "GET /v1/policies/diff", auth: authKey, scopes: scopePolicyRead, handle: (*Server).diffPolicies},
		{pattern: "POST /v1/policies/dry-run", auth: authKey, scopes: scopeDryRun, handle: (*Server).dryRun},
		{pattern: "POST /v1/policies/replays", auth: authKey, scopes: scopePolicyRead, handle: (*Server).startReplay},
		{pattern: "GET /v1/policies/replays/{replayId}", auth: authKey, scopes: scopePolicyRead, handle: (*Server).getReplay},
		{pattern: "GET /v1/policies/replays/{replayId}/events", auth: authKey, scopes: scopePolicyRead, handle: (*Server).replayEvents},
		{pattern: "PUT /v1/policies/source", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).putPolicySource},
		{pattern: "GET /v1/policies/source", auth: authKey, scopes: scopePolicyRead, handle: (*Server).getPolicySource},
		{pattern: "DELETE /v1/policies/source", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).deletePolicySource},
		{pattern: "POST /v1/policies/source/pull", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).pullPolicySource},

		// Decisions: one evaluation path behind every entry point.
		{pattern: "POST /v1/protocol/evaluate-decision", auth: authKey, scopes: scopeDecisionWrite, handle: (*Server).evaluateDecision},
		{pattern: "POST /v1/decisions/evaluate", auth: authKey, scopes: scopeDecisionWrite, deprecated: true, handle: (*Server).evaluateDecision},
		{pattern: "POST /v1/action-gate/evaluate", auth: authKey, scopes: scopeDecisionWrite, handle: (*Server).actionGate},
		{pattern: "POST /v1/orgs/{orgId}/crm/action-gate", auth: authKey, scopes: scopeDecisionWrite, handle: (*Server).crmActionGate},
		{pattern: "POST /v1/workspace-app/action-gate", auth: authKey, scopes: scopeDecisionWrite, handle: (*Server).workspaceActionGate},
		{pattern: "POST /v1/cloud/agent/extensions/verify", auth: authKey, scopes: scopeDecisionWrite, handle: (*Server).cloudAgentVerify},
		{pattern: "GET /v1/protocol/reason-codes", auth: authKey, handle: (*Server).reasonCodes},
		{pattern: "GET /v1/protocol/shadow-reports", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).shadowReport},
		// The operator console's reads (extensions): decisions filtered,
		// activity over time.
		{pattern: "GET /v1/console/decisions", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).consoleDecisions},
		{pattern: "GET /v1/console/activity", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).consoleActivity},
		{pattern: "GET /v1/console/escalations", auth: authKey, scopes: scopeExecRead, handle: (*Server).consoleEscalations},

		// Agent-safe execution: grant → claim → finalize.
		{pattern: "POST /v1/authority/enforce-and-bind", auth: authKey, scopes: scopeDecisionWrite, handle: (*Server).enforceAndBind},
		{pattern: "GET /v1/authority/escalations/{escalationId}", auth: authKey, scopes: scopeExecRead, handle: (*Server).escalationStatus},
		{pattern: "DELETE /v1/authority/escalations/{escalationId}", auth: authKey, scopes: scopeCancelEscalation, handle: (*Server).cancelEscalation},
		// A service-to-service hint: it only makes Clearance ask the
		// approval service now; it never authorizes anything by itself.
		{pattern: "POST /v1/authority/presence-completions", auth: authKey, scopes: scopeDecisionWrite, handle: (*Server).presenceCompletion},
		{pattern: "POST /v1/execution/verify-token", auth: authKey, scopes: scopeExecRead, handle: (*Server).verifyToken},
		{pattern: "POST /v1/execution/claim-token", auth: authKey, scopes: scopeDecisionWrite, refusal: claimRefusal, handle: (*Server).claimToken},
		{pattern: "POST /v1/execution/consume-token", auth: authKey, scopes: scopeDecisionWrite, refusal: claimRefusal, handle: (*Server).claimToken},
		{pattern: "POST /v1/execution/finalize-token", auth: authKey, scopes: scopeDecisionWrite, refusal: finalizeRefusal, handle: (*Server).finalizeToken},
		{pattern: "GET /.well-known/clearance-execution-grant-jwks.json", auth: authPublic, handle: (*Server).jwks},
		{pattern: "POST /v1/execution/agent-keys", auth: authKey, scopes: scopePolicyWrite, handle: agentKeys.register},
		{pattern: "GET /v1/execution/agent-keys", auth: authKey, scopes: scopePolicyRead, handle: agentKeys.list},
		{pattern: "DELETE /v1/execution/agent-keys/{kid}", auth: authKey, scopes: scopePolicyWrite, handle: agentKeys.revoke},
		{pattern: "POST /v1/execution/provider-keys", auth: authKey, scopes: scopePolicyWrite, handle: providerKeys.register},
		{pattern: "GET /v1/execution/provider-keys", auth: authKey, scopes: scopePolicyRead, handle: providerKeys.list},
		{pattern: "DELETE /v1/execution/provider-keys/{kid}", auth: authKey, scopes: scopePolicyWrite, handle: providerKeys.revoke},
		// UCP checkout authority: a checkout bound to an exact-action grant,
		// and the merchant keys its terms are verified with.
		{pattern: "POST /v1/ucp/checkout/authorize", auth: authKey, scopes: scopeDecisionWrite, refusal: checkoutRefusal, handle: (*Server).authorizeCheckout},
		{pattern: "POST /v1/ucp/signing-keys", auth: authKey, scopes: scopePolicyWrite, handle: merchantKeys.register},
		{pattern: "GET /v1/ucp/signing-keys", auth: authKey, scopes: scopePolicyRead, handle: merchantKeys.list},
		{pattern: "DELETE /v1/ucp/signing-keys/{kid}", auth: authKey, scopes: scopePolicyWrite, handle: merchantKeys.revoke},
		{pattern: "GET /v1/execution/reconciliations", auth: authKey, scopes: scopeReconcileRead, handle: (*Server).listIndeterminate},
		{pattern: "POST /v1/execution/reconciliations/{grantId}", auth: authKey, scopes: scopeReconcile, handle: (*Server).reconcile},
		{pattern: "POST /v1/protocol/executions/dispatches", auth: authKey, scopes: scopeDecisionWrite, handle: (*Server).recordDispatch},
		// Spend-control gates: the active policy's budgets, and what a
		// claim reserved.
		{pattern: "GET /v1/execution/spend-gates", auth: authKey, scopes: scopeSpendRead, handle: (*Server).listSpendGates},
		{pattern: "GET /v1/execution/spend-gates/{gateId}", auth: authKey, scopes: scopeSpendRead, handle: (*Server).getSpendGate},
		{pattern: "GET /v1/execution/spend-reservations/{grantId}", auth: authKey, scopes: scopeSpendRead, handle: (*Server).getSpendReservation},

		// Evidence.
		{pattern: "GET /v1/dossiers/{decisionId}", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).dossierByDecision},
		{pattern: "GET /v1/protocol/dossiers/{dossierId}", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).dossier},
		{pattern: "GET /v1/protocol/dossiers/{dossierId}/reproduce", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).reproduceDossier},
		{pattern: "GET /v1/protocol/decision-chains/{chainId}", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).decisionChain},
		{pattern: "GET /v1/protocol/decision-chains/by-evaluation/{evaluationId}", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).decisionChainByEvaluation},
		{pattern: "GET /v1/protocol/dossiers/{dossierId}/overrides", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).overrides},
		{pattern: "POST /v1/protocol/dossiers/{dossierId}/overrides", auth: authKey, scopes: scopeOverride, handle: (*Server).recordOverride},
		{pattern: "GET /v1/protocol/dossiers/{dossierId}/dispatches", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).dispatches},
		{pattern: "GET /v1/protocol/audit/ledger", auth: authKey, scopes: scopeAuditRead, handle: (*Server).ledger},
		{pattern: "GET /v1/protocol/audit/ledger/verify", auth: authKey, scopes: scopeAuditRead, handle: (*Server).verifyLedger},
		{pattern: "GET /v1/protocol/audit/ledger/checkpoint", auth: authKey, scopes: scopeAuditRead, handle: (*Server).ledgerCheckpoint},
		// Extension: seal now instead of waiting for the sealer (reads never seal).
		{pattern: "POST /v1/protocol/audit/ledger/checkpoints", auth: authKey, scopes: scopeAuditWrite, handle: (*Server).sealLedger},
		{pattern: "GET /v1/protocol/audit/ledger/checkpoints/{size}", auth: authKey, scopes: scopeAuditRead, handle: (*Server).ledgerCheckpointAt},
		{pattern: "GET /v1/protocol/audit/ledger/proofs/inclusion", auth: authKey, scopes: scopeAuditRead, handle: (*Server).inclusionProof},
		{pattern: "GET /v1/protocol/audit/ledger/proofs/consistency", auth: authKey, scopes: scopeAuditRead, handle: (*Server).consistencyProof},
		{pattern: "GET /.well-known/clearance-ledger-key", auth: authPublic, handle: (*Server).ledgerKey},
		{pattern: "GET /v1/protocol/dossiers/{dossierId}/proof-packet", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).proofPacket},
		{pattern: "GET /v1/protocol/dossiers/{dossierId}/agent-action-capsule", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).agentActionCapsule},
		{pattern: "GET /v1/protocol/dossiers/{dossierId}/agent-action-capsule/producer-envelopes", auth: authKey, scopes: scopeDecisionRead, handle: (*Server).producerEnvelopes},

		// Share links (extension): the org makes and revokes them; anyone
		// holding one verifies the dossier it names, publicly.
		{pattern: "GET /v1/public/decision-dossiers/{dossierId}/verify", auth: authPublic, handle: (*Server).verifySharedDossier},
		{pattern: "GET /v1/public/decision-dossiers/{dossierId}/reproduce", auth: authPublic, handle: (*Server).reproduceSharedDossier},
		{pattern: "GET /v1/public/decision-dossiers/{dossierId}/proof-bundle", auth: authPublic, handle: (*Server).sharedProofBundle},
		{pattern: "POST /v1/protocol/dossiers/{dossierId}/share-links", auth: authKey, scopes: scopeShareRevoke, handle: (*Server).createShareLink},
		{pattern: "DELETE /v1/protocol/share-links", auth: authKey, scopes: scopeShareRevoke, handle: (*Server).revokeShareLinks},
		// The reader (extension): anyone posts evidence and reads whether it
		// verifies, on a page or as JSON.
		{pattern: "POST /v1/reader/verify", auth: authPublic, throttle: (*Server).throttleReader, handle: (*Server).verifyArtifact},
		{pattern: "GET /reader", auth: authPublic, handle: (*Server).readerPage},
		// The operator console (extension): a static page that reads the
		// API with the operator's key; it holds no data, so it is public.
		{pattern: "GET /console", auth: authPublic, handle: (*Server).consolePage},
		{pattern: "GET /console/assets/{file}", auth: authPublic, handle: (*Server).consoleAsset},

		// Inbound signals: the org's connectors, and the ingress they post
		// to, authenticated by the connector's secret (no API key).
		{pattern: "POST /v1/signals/connectors", auth: authKey, scopes: scopeIntegration, handle: (*Server).createSignalConnector},
		{pattern: "GET /v1/signals/connectors", auth: authKey, scopes: scopeIntegration, handle: (*Server).listSignalConnectors},
		{pattern: "DELETE /v1/signals/connectors/{connectorId}", auth: authKey, scopes: scopeIntegration, handle: (*Server).revokeSignalConnector},
		{pattern: "POST /v1/signals/webhooks/{connectorId}", auth: authPublic, throttle: (*Server).throttleSignals, handle: (*Server).ingestSignals},

		// Validation packs (audit exports): built in the background.
		// Outbound callbacks: the WEBHOOK integration (connect is the spec's;
		// read, delete, the delivery log and redelivery are extensions).
		// Onboarding: sign-up by e-mail code, then the mapping session and
		// its deployment bundle with the onboarding grant.
		{pattern: "POST /v1/public/auth/register/start", auth: authPublic, throttle: (*Server).throttleSignUp, handle: (*Server).registerStart},
		{pattern: "POST /v1/public/auth/register/verify", auth: authPublic, throttle: (*Server).throttleSignUp, handle: (*Server).registerVerify},
		// Account sign-in (a session cookie) and the owner's org-wide revocation.
		{pattern: "POST /v1/public/auth/login/start", auth: authPublic, throttle: (*Server).throttleSignUp, handle: (*Server).loginStart},
		{pattern: "POST /v1/public/auth/login/verify", auth: authPublic, throttle: (*Server).throttleSignUp, handle: (*Server).loginVerify},
		{pattern: "GET /v1/public/auth/session", auth: authAccount, handle: (*Server).accountSession},
		{pattern: "DELETE /v1/public/auth/session", auth: authAccount, handle: (*Server).signOut},
		{pattern: "POST /v1/public/auth/workspaces/{orgId}/revoke-credentials", auth: authAccount, handle: (*Server).revokeCredentials},
		{pattern: "POST /v1/public/auth/workspaces/{orgId}/console-key", auth: authAccount, handle: (*Server).issueConsoleKey},
		// The zero-human lane: an agent starts a provisional workspace (SHADOW
		// only, decision scopes, 72 h); a signed-in owner claims it.
		{pattern: "POST /v1/public/workspaces/provisional", auth: authPublic, throttle: (*Server).throttleSignUp, handle: (*Server).provisionWorkspace},
		{pattern: "POST /v1/public/auth/workspaces/claim", auth: authAccount, handle: (*Server).claimWorkspace},
		// The automation connector: OAuth 2.0 authorization code with PKCE,
		// for clients the platform registers, then its credential's routes.
		{pattern: "POST /v1/platform/automation/clients", auth: authPlatform, handle: (*Server).registerAutomationClient},
		{pattern: "GET /v1/public/auth/automation/authorize", auth: authPublic, throttle: (*Server).throttleSignUp, handle: (*Server).automationAuthorize},
		{pattern: "POST /v1/public/auth/automation/authorize", auth: authPublic, form: true, throttle: (*Server).throttleSignUp, handle: (*Server).automationConsent},
		{pattern: "POST /v1/public/auth/automation/token", auth: authPublic, form: true, throttle: (*Server).throttleSignUp, handle: (*Server).automationToken},
		{pattern: "GET /v1/automation/me", auth: authKey, scopes: scopeAutomation, handle: (*Server).automationMe},
		{pattern: "POST /v1/automation/policy/bootstrap", auth: authKey, scopes: scopeAutomation, handle: (*Server).automationBootstrap},
		{pattern: "POST /v1/automation/webhooks", auth: authKey, scopes: scopeAutomation, handle: (*Server).addAutomationWebhook},
		{pattern: "GET /v1/automation/webhooks", auth: authKey, scopes: scopeAutomation, handle: (*Server).automationWebhooks},
		{pattern: "DELETE /v1/automation/webhooks/{subscriptionId}", auth: authKey, scopes: scopeAutomation, handle: (*Server).removeAutomationWebhook},
		{pattern: "GET /v1/automation/webhooks/{subscriptionId}/deliveries", auth: authKey, scopes: scopeAutomation, handle: (*Server).automationWebhookDeliveries},
		{pattern: "POST /v1/public/pilot/signal-mapping/sessions", auth: authOnboarding, handle: (*Server).createMappingSession},
		{pattern: "POST /v1/public/pilot/signal-mapping/sessions/{sessionId}/deployment-bundle", auth: authOnboarding, handle: (*Server).deploymentBundle},

		{pattern: "POST /v1/orgs/{orgId}/integrations/WEBHOOK/connect", auth: authKey, scopes: scopeIntegration, handle: (*Server).connectWebhook},
		{pattern: "GET /v1/orgs/{orgId}/integrations/WEBHOOK", auth: authKey, scopes: scopeIntegration, handle: (*Server).getWebhook},
		{pattern: "DELETE /v1/orgs/{orgId}/integrations/WEBHOOK", auth: authKey, scopes: scopeIntegration, handle: (*Server).deleteWebhook},
		{pattern: "GET /v1/orgs/{orgId}/integrations/WEBHOOK/deliveries", auth: authKey, scopes: scopeIntegration, handle: (*Server).webhookDeliveries},
		{pattern: "POST /v1/orgs/{orgId}/integrations/WEBHOOK/deliveries/{deliveryId}/redeliver", auth: authKey, scopes: scopeIntegration, handle: (*Server).redeliverWebhook},

		{pattern: "POST /v1/orgs/{orgId}/audit-exports", auth: authKey, scopes: scopeExportWrite, handle: (*Server).createExport},
		{pattern: "GET /v1/orgs/{orgId}/audit-exports", auth: authKey, scopes: scopeExportRead, handle: (*Server).listExports},
		{pattern: "GET /v1/orgs/{orgId}/audit-exports/{exportId}", auth: authKey, scopes: scopeExportRead, handle: (*Server).getExport},
		{pattern: "GET /v1/orgs/{orgId}/audit-exports/{exportId}/download", auth: authKey, scopes: scopeExportRead, handle: (*Server).downloadExport},

		// Personal data: sealed under per-subject keys, erased by
		// destroying them; the platform's route is a marketplace's
		// deletion notice.
		{pattern: "PUT /v1/orgs/{orgId}/data-protection", auth: authKey, scopes: scopePrivacyWrite, handle: (*Server).putDataProtection},
		{pattern: "GET /v1/orgs/{orgId}/data-protection", auth: authKey, scopes: scopePrivacyRead, handle: (*Server).getDataProtection},
		{pattern: "DELETE /v1/orgs/{orgId}/data-protection", auth: authKey, scopes: scopePrivacyWrite, handle: (*Server).deleteDataProtection},
		{pattern: "POST /v1/orgs/{orgId}/erasures", auth: authKey, scopes: scopePrivacyWrite, handle: (*Server).eraseSubject},
		{pattern: "POST /v1/platform/orgs/{orgId}/erasures", auth: authPlatform, handle: (*Server).eraseOrgPersonalData},
		// Decision federation (extension): envelopes of the org's decisions
		// for other deployments, and the org's trust list of theirs.
		{pattern: "POST /v1/federation/envelopes", auth: authKey, scopes: scopeFederationIssue, handle: (*Server).issueFederationEnvelope},
		{pattern: "GET /v1/federation/issuers", auth: authKey, scopes: scopePolicyRead, handle: (*Server).listTrustedIssuers},
		{pattern: "GET /v1/federation/issuers/{issuerId}", auth: authKey, scopes: scopePolicyRead, handle: (*Server).getTrustedIssuer},
		{pattern: "PUT /v1/federation/issuers/{issuerId}", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).putTrustedIssuer},
		{pattern: "DELETE /v1/federation/issuers/{issuerId}", auth: authKey, scopes: scopePolicyWrite, handle: (*Server).deleteTrustedIssuer},
	}
}
