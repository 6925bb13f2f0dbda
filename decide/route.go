package decide

// Route names the entry point a decision came through. It is recorded in
// the dossier and scopes Idempotency-Keys.
type Route string

// Entry points that evaluate decisions; all share one evaluation path.
const (
	RouteEvaluateDecision Route = "evaluate-decision"
	RouteActionGate       Route = "action-gate"
	RouteCRMActionGate    Route = "crm.action-gate"
	RouteWorkspaceApp     Route = "workspace-app.action-gate"
	RouteCloudAgentVerify Route = "cloud.agent.extensions.verify"
	// RouteEnforceAndBind is the entry point of signed execution intents.
	RouteEnforceAndBind Route = "enforce-and-bind"
	// RouteManagedEscalation is the fresh evaluation of a managed
	// escalation's original intent with its verified approval.
	RouteManagedEscalation Route = "managed-escalation"
	// RouteUCPCheckout is the authorization of a UCP checkout completion.
	RouteUCPCheckout Route = "ucp.checkout.authorize"
)

// defaultSurface is the surface a gate route fills in when the body names
// none; "" for routes that take the body's as it is.
func (r Route) defaultSurface() string {
	switch r {
	case RouteActionGate:
		return "http"
	case RouteCRMActionGate:
		return "crm"
	case RouteWorkspaceApp:
		return "workspace_app"
	}
	return ""
}

// known reports whether r is a route Evaluate decodes.
func (r Route) known() bool {
	switch r {
	case RouteEvaluateDecision, RouteActionGate, RouteCRMActionGate, RouteWorkspaceApp, RouteCloudAgentVerify:
		return true
	}
	return false
}
