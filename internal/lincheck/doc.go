// Package lincheck checks that the execution lifecycle of grants is
// linearizable: concurrent histories of claim and finalize, recorded against
// the real engine (in-process and over HTTP; on Pebble and, when reachable,
// PostgreSQL), are checked with porcupine (github.com/anishathalye/porcupine)
// against a sequential model of one grant. The package has no API: it is
// all tests.
//
// # The contract
//
// Each grant, on its own, behaves as if every claim and finalize took effect
// atomically at one instant between its call and its answer, in the order of
// this sequential model:
//
//	ISSUED        --claim-->               CLAIMED(t), answer {ok, t}, t a fresh claim token
//	CLAIMED(t)    --finalize(t, o)-->      o (COMMITTED, FAILED or INDETERMINATE), answer {ok}
//	any other state or token               unchanged, answer {refused}
//
// So a grant is claimed at most once, only the token its one successful claim
// handed out finalizes it, and it is finalized at most once. A refusal changes
// nothing. Grants are independent (each has its own nonce and scope), so a
// history is checked one grant at a time.
//
// An operation whose answer is unknown (its context was cancelled mid-call,
// the HTTP request timed out or failed, the server answered 5xx) may or may
// not have taken effect: it is recorded with a return time of +infinity
// (math.MaxInt64) and an "unknown" output that the model accepts in every
// state, applying the operation's effect if it could take effect. Since such
// an operation may be linearized after everything else, "it never happened"
// stays a legal explanation. A claim whose answer was lost leaves the grant
// CLAIMED with a token nobody knows.
//
// Grants that share a spend-control budget are not independent: their
// histories are checked as one partition against a model of all of them
// and the budget (spend_test.go): a claim runs only while the budget holds
// its amount, FAILED frees it, COMMITTED and INDETERMINATE keep it.
//
// Leases and expiries are out of scope: the tests hold the engine's and the
// store's clock still, so no lease ends during a history.
//
// # Running
//
//	go test -race ./internal/lincheck/                      # default: small, < 30 s
//	CLEARANCE_LIN_OPS=5000 go test -run Lin ./internal/lincheck/
//	CLEARANCE_LIN_OUT=/tmp/lin go test -run Lin ./internal/lincheck/
//	CLEARANCE_REQUIRE_POSTGRES=1 CLEARANCE_TEST_POSTGRES=postgres://... go test -run Lin ./internal/lincheck/
//
// CLEARANCE_LIN_OPS is the number of operations each recording test issues
// (default 768; 16 clients, 8 grants per history, 8 operations per client
// per history). CLEARANCE_LIN_SEED fixes the random seed (it is logged).
// PostgreSQL is CLEARANCE_TEST_POSTGRES or
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable; the test runs in
// a fresh random schema and is skipped when the database is unreachable,
// unless CLEARANCE_REQUIRE_POSTGRES=1.
//
// A history that is not linearizable fails its test; its porcupine
// visualization (an HTML file) is written under the test's temporary
// directory and, when CLEARANCE_LIN_OUT names a directory, there too, and
// its path is logged. TestLinCatchesDoubleClaim shows the checker catching a
// deliberately broken lifecycle that lets a grant be claimed twice.
package lincheck
