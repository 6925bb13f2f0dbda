// Package load is the engine of `clearance loadtest`: it drives a running
// Clearance server (or, for comparisons, a peer policy server) over HTTP and
// measures throughput, latency and errors.
//
// # Scenarios
//
//   - evaluate: POST /v1/protocol/evaluate-decision with varied amounts
//     (about 70 % below 1,000, 20 % from 1,000 to 9,999.99, 10 % from 10,000),
//     decision_type PAYMENT, workflow_key "loadtest". One request is one
//     operation. No policy is published: the org's active policy answers (the
//     starter policy, SHADOW, for a fresh org).
//   - cycle: a freshly signed intent (new intent_id, nonce and
//     concurrency_scope each time, amount below 1,000) through
//     POST /v1/authority/enforce-and-bind, then /v1/execution/claim-token,
//     then /v1/execution/finalize-token with outcome COMMITTED. The three
//     requests are one operation; each step's latency is also recorded. The
//     intent is built and signed before the clock of the operation starts.
//   - mixed: operation n (1-based, in the measured phase) is a cycle when
//     floor(n·share) > floor((n−1)·share), an evaluation otherwise, so
//     Count N runs exactly floor(N·share) cycles.
//
// # Setup
//
// The run starts with GET /v1/health. With Config.APIKey the org of that
// key is used and every worker sends that key; otherwise Config.PlatformKey
// creates a fresh org named "loadtest-<run id>" (POST /v1/platform/orgs) and
// up to MaxClientKeys API keys for it (POST /v1/platform/orgs/{id}/api-keys,
// scope decision:write), worker i sending key i mod the count: each client
// is its own credential, like a fleet of agents, and the server's
// per-credential rate limit (1,000 requests/s by default) meters each. For
// cycle and mixed the tool generates an Ed25519 agent key, registers it
// (POST /v1/execution/agent-keys) and publishes an ENFORCEMENT bundle
// "clearance-loadtest", version "loadtest-<run id>" (amount ≥ 10,000 BLOCK,
// ≥ 1,000 ESCALATE, otherwise ALLOW), which becomes the org's active policy:
// do not point the tool at an org whose policy matters. Targets other than
// localhost, 127.0.0.0/8 and [::1] are refused unless Config.AllowRemote.
//
// # Peers
//
// With Config.Peer set to PeerOPA the target is an OPA server
// (`opa run --server`) holding the starter policy in Rego
// (bench/peers/starter.rego) and only the evaluate scenario runs. Setup is
// GET /health and one probe decision (amount 5,000); no credentials are
// sent. Each operation POSTs the same document as the evaluate scenario,
// drawn from the same amount distribution, wrapped as {"input": …}, to
// /v1/data/<Config.OPAPath> (default clearance/starter/decision). A 2xx
// answer succeeds only when its "result" is the decision Clearance's starter
// policy (policy.Starter) gives for that input: the same outcome and the
// same winning rule ids ({"outcome": "ESCALATE", "rules":
// ["amount-escalation-band"]}). OPA keeps no evidence; Clearance writes and
// fsyncs a dossier and a ledger entry per decision.
//
// # Measurement
//
// Workers (Config.Concurrency) share one http.Client whose idle pool holds a
// connection per worker. Operations started during Config.Warmup are
// discarded. The run stops at Config.Duration after the warmup, after
// Config.Count measured operations (whichever comes first), or when the
// context is cancelled (operations cut short by the cancellation are
// discarded). Each request is bounded by Config.Timeout. Config.Rate, when
// set, paces the workers together: operations start at most that many per
// second, evenly spaced (a steady load for soaks rather than a saturating
// one); the workers only bound how many are in flight.
//
// Config.Orgs spreads the workers over that many orgs the run creates
// (worker i loads org i mod Orgs): per-org serialization must not become a
// global one, so N orgs should together reach at least one org's throughput.
//
// Config.Prefill first records that many decisions in the run's org with
// every worker, unmeasured, so that the run measures a store of that size
// (compare a run with --prefill 1000000 against one on a fresh store: the
// ratio is how throughput holds up as the store grows). A failed decision
// stops the fill and the run.
//
// Latencies are of successful operations and successful requests only, in
// an HDR histogram of 1 µs to 60 s with 3 significant digits (longer values
// are recorded as 60 s). Errors are counted per failed request: any non-2xx
// status, a transport failure, or a 2xx answer that does not carry what the
// next step needs (an enforce-and-bind answer without execution_token, a
// claim without should_execute true, a peer answer without the starter
// policy's decision).
//
// A run passes when at least one operation was measured, no request got a
// 5xx or a 4xx or failed in transport, every cycle got should_execute true
// and every peer answer carried the starter policy's decision. A refused
// request (429 from the rate limit, for instance) fails the run: a run that
// was partly refused measured the refusals, not the engine.
//
// # JSON document (Result, format 1)
//
// Field names are stable; latencies are integer microseconds.
//
//	format              1
//	scenario            "evaluate" | "cycle" | "mixed"
//	target              base URL loaded
//	self_hosted         true when the tool started the server itself
//	peer                "opa" when the target is a peer; absent for Clearance
//	opa_path            the OPA data path loaded (peer opa only)
//	concurrency         workers
//	rate                the pace (Config.Rate), absent when none
//	cycle_share         share of cycles (mixed), 0 for evaluate, 1 for cycle
//	warmup_seconds      warmup length
//	elapsed_seconds     measured window: end of warmup to the last operation
//	operations          measured operations, succeeded + failed
//	succeeded, failed   operations without / with an error
//	ops_per_second      succeeded / elapsed_seconds
//	requests            HTTP requests of measured operations
//	requests_per_second requests / elapsed_seconds
//	latency             per operation, all kinds: {count, mean_us, p50_us,
//	                    p90_us, p99_us, p999_us, max_us}
//	operations_by_kind  {"evaluate": latency, "cycle": latency}, the kinds the
//	                    scenario runs
//	steps               per request kind: "evaluate", "enforce_and_bind",
//	                    "claim", "finalize" (the ones the scenario runs)
//	errors              {total, by_status: {"409": n, "transport": n},
//	                    by_code: {"STALE_AUTHORIZATION": n}} — by_code keys
//	                    are the problem body's code, NO_EXECUTION_TOKEN,
//	                    NOT_EXECUTED, UNDECODABLE_RESPONSE, TIMEOUT,
//	                    TRANSPORT_ERROR, NO_CODE, or for a peer NO_RESULT,
//	                    WRONG_OUTCOME, WRONG_RULES
//	should_execute      cycles only: {"true": n, "false": n} per cycle (a
//	                    cycle that got no grant counts as false)
//	pass                the verdict above; failures lists why not
//	machine             {goos, goarch, cpus, gomaxprocs, go} of the tool
//	started_at          RFC 3339 start of the run
//	orgs                how many orgs the run loaded
//	prefill             with Config.Prefill: {decisions, seconds, per_second}
//	                    of the fill that ran before the warmup
package load
