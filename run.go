package clearance

import (
	"context"
	"sync"

	"github.com/clearancehq/clearance/analytics"
	"github.com/clearancehq/clearance/escalation"
	"github.com/clearancehq/clearance/execution"
	"github.com/clearancehq/clearance/policies"
	"github.com/clearancehq/clearance/policysource"
)

// Run does the Engine's background work until ctx ends, and returns once
// every worker has stopped: the sealer signs a checkpoint of every ledger
// that grew (each DefaultSealInterval), the key-revocation watcher applies
// grant keys revoked by other servers on the same store (each
// DefaultKeyRevocationInterval), the export worker builds queued
// validation packs (handing a build in progress back when ctx ends), and
// the expiry worker records the claims of this Engine whose lease passed
// without a finalization as INDETERMINATE (each
// execution.DefaultExpiryInterval), and the escalation worker expires
// managed escalations past their deadline and retries the approval checks
// an approval service could not answer (each escalation.DefaultPoll), and
// the webhook worker hands committed events to WEBHOOK integrations and
// delivers them (woken by each event, and each Options.Webhooks.Poll), and
// the analytics worker counts the new decisions of the orgs this Engine
// wrote into their rollups (each analytics.DefaultRollupInterval), and the
// replay worker runs queued policy replays (woken by each, and each
// policies.DefaultReplayPoll), and the policy-source worker pulls the
// linked repositories whose scheduled pull is due (policysource.DefaultPoll).
//
// A server runs it for as long as it serves; an embedder that does not run
// it gets no checkpoints but the ones it seals (Audit.SealLedger) and no
// packs but the ones it builds (Exports.Process); lapsed claims are listed
// for reconciliation either way, and recorded by Execution.ExpireLapsed; events
// wait in the outbox until a Run delivers them. Run before closing the
// backend's last use: close the backend after Run has returned.
func (e *Engine) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, work := range []func(context.Context){
		func(ctx context.Context) { e.Audit.RunSealer(ctx, DefaultSealInterval) },
		func(ctx context.Context) { e.Admin.RunKeyRevocations(ctx, DefaultKeyRevocationInterval) },
		func(ctx context.Context) { e.Exports.Run(ctx, e.opts.ExportWorker) },
		func(ctx context.Context) { e.Execution.RunExpiry(ctx, execution.DefaultExpiryInterval) },
		func(ctx context.Context) { e.Escalations.Run(ctx, escalation.DefaultPoll) },
		func(ctx context.Context) { e.Webhooks.Run(ctx) },
		func(ctx context.Context) { e.Analytics.Run(ctx, analytics.DefaultRollupInterval) },
		func(ctx context.Context) { e.Policies.RunReplays(ctx, policies.DefaultReplayPoll) },
		func(ctx context.Context) { e.PolicySources.Run(ctx, policysource.DefaultPoll) },
	} {
		wg.Go(func() { work(ctx) })
	}
	wg.Wait()
}
