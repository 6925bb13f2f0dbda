package server_test

// Dependencies down (issue 22): the approval service, the mail server and a
// callback receiver each refuse connections, hang past the caller's
// timeout, and answer errors, behind a faultFront, while the server keeps
// running on Pebble or PostgreSQL (CLEARANCE_E2E_STORE). During a fault no
// answer authorizes anything that was not granted and nothing is left
// half-done; the work owed is retried by the workers, which the tests drive
// (Escalations.Process, Webhooks.Dispatch and Deliver) on the test clock;
// when the dependency is back, everything owed is done and nothing is
// lost. Each test logs a figures line.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/clearancehq/clearance"
	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/approval/approvaltest"
	"github.com/clearancehq/clearance/escalation"
	"github.com/clearancehq/clearance/internal/faultproxy"
	"github.com/clearancehq/clearance/internal/outbound"
	"github.com/clearancehq/clearance/webhook"
)

// depTimeout is the callers' timeout in these tests: how long a hanging
// dependency is waited for.
const depTimeout = 400 * time.Millisecond

// depFault is one way a dependency is down.
type depFault struct {
	name  string
	front frontMode
	// errors is set for a dependency that is reached but answers errors.
	errors bool
}

var depFaults = []depFault{
	{name: "connection refused", front: frontRefused},
	{name: "hanging past the timeout", front: frontHang},
	{name: "answering errors", front: frontUp, errors: true},
}

// tally counts answers by status (and code), for the figures line.
type tally map[string]int

func (c tally) add(r *result) {
	k := fmt.Sprint(r.Status)
	if code := r.str("code"); code != "" && r.Status >= 300 {
		k += " " + code
	}
	c[k]++
}

func (c tally) String() string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s ×%d", k, c[k]))
	}
	return strings.Join(out, ", ")
}

// frontDirectory gives every org the fake approval service at url (its
// front), with a credential of its own.
type frontDirectory struct {
	fake *approvaltest.Service
	url  string
}

func (d frontDirectory) Endpoint(_ context.Context, org string) (approval.Endpoint, error) {
	cred := "cred-" + org
	d.fake.AddCredential(cred, org)
	return approval.Endpoint{BaseURL: d.url, Credential: cred, Issuer: d.fake.Issuer()}, nil
}

// wantUnavailableClaim checks a claim refused for an unreachable
// dependency: 503, the fail-closed body.
func wantUnavailableClaim(t testing.TB, r *result, code string) {
	t.Helper()
	if r.Status != http.StatusServiceUnavailable || r.str("code") != code {
		t.Fatalf("want 503 %s: %s", code, r)
	}
	if lookup(r.JSON, "should_execute") != false || lookup(r.JSON, "valid") != false {
		t.Fatalf("a refused claim must say should_execute false: %s", r)
	}
	neverExecutes(t, r)
}

// The approval service down: a MANAGED escalation is not opened, a
// completion waits VERIFYING, a claim of a grant issued on an approval is
// refused, all non-authorizing; back, the escalations approved meanwhile
// reach GRANT_READY through the worker's retries and every grant is claimed
// exactly once.
func TestApprovalServiceDownAndBack(t *testing.T) {
	t.Parallel()
	e := &escEnv{}
	var front *faultFront
	e.execEnv = newExecEnvWith(t, approvalBundle, func(x *execEnv) {
		e.fake = approvaltest.New(t, approvaltest.Options{Now: x.clock})
		front = newFaultFront(t, e.fake.Listener.Addr().String())
		x.approvals = frontDirectory{fake: e.fake, url: "http://" + front.addr}
		x.tune = func(o *clearance.Options) {
			o.ApprovalClient = approval.NewHTTP(outbound.New(outbound.Options{AllowPrivate: true, Timeout: depTimeout}),
				approval.HTTPOptions{Now: x.clock})
		}
	})
	during, after := tally{}, tally{}
	var faults, owed, resolved, claims int
	for _, f := range depFaults {
		// Before the fault: an escalation waiting for its human, and a
		// grant issued on an approval (re-checked at claim).
		pendingBind, pending := e.escalate(t, 2000)
		pendingReq := e.requestOf(t, pending)
		readyBind, ready := e.escalate(t, 2100)
		e.fake.Approve(e.requestOf(t, ready), "ana")
		done := e.complete(t, ready).want(t, http.StatusAccepted)
		g := issued{token: done.str("execution_token"), hash: readyBind.str("intent_hash"), grantID: done.str("grant_id")}
		if g.token == "" {
			t.Fatalf("%s: no grant before the fault: %s", f.name, done)
		}

		faults++
		front.set(f.front)
		if f.errors {
			status := []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}
			var n atomic.Int64
			e.fake.SetFault(func(w http.ResponseWriter, _ *http.Request) bool {
				http.Error(w, "down", status[int(n.Add(1))%len(status)])
				return true
			})
		}
		// The human approves at the service while Clearance cannot reach it.
		e.fake.Approve(pendingReq, "bob")
		owed++

		head := e.ledgerHead(t)
		jws, _ := e.intent(t, intentSpec{amount: 3000, mutate: managedIntent})
		r := e.bind(t, jws, nil)
		during.add(r)
		r.wantProblem(t, http.StatusServiceUnavailable, "APPROVAL_SERVICE_UNAVAILABLE")
		if r.str("execution_token") != "" || e.ledgerHead(t) != head {
			t.Fatalf("%s: a MANAGED intent the service could not open recorded something: %s", f.name, r)
		}
		c := e.complete(t, pending)
		during.add(c)
		if c.Status != http.StatusAccepted || c.str("status") != "VERIFYING" || c.str("execution_token") != "" {
			t.Fatalf("%s: a completion while the service is down: %s", f.name, c)
		}
		cl := e.claim(t, pathClaim, g.token, g.hash)
		during.add(cl)
		wantUnavailableClaim(t, cl, "APPROVAL_SERVICE_UNAVAILABLE")
		// The worker's retry, due, fails again and keeps waiting.
		e.advance(escalation.DefaultRetry + time.Second)
		e.process(t)
		if st := e.status(t, pending); st.str("status") != "VERIFYING" || st.str("execution_token") != "" {
			t.Fatalf("%s: after a retry while down: %s", f.name, st)
		}

		// Back.
		e.fake.SetFault(nil)
		front.set(frontUp)
		e.advance(escalation.DefaultRetry + time.Second)
		e.process(t)
		st := e.status(t, pending)
		after.add(st)
		if st.str("status") != "GRANT_READY" || st.str("execution_token") == "" {
			t.Fatalf("%s: the escalation approved while the service was down, after its return: %s", f.name, st)
		}
		resolved++
		back := issued{token: st.str("execution_token"), hash: pendingBind.str("intent_hash"), grantID: st.str("grant_id")}
		for _, x := range []issued{g, back} {
			win := e.claim(t, pathClaim, x.token, x.hash)
			after.add(win)
			if lookup(win.JSON, "should_execute") != true {
				t.Fatalf("%s: a grant after the service's return: %s", f.name, win)
			}
			claims++
			again := e.claim(t, pathClaim, x.token, x.hash)
			after.add(again)
			wantFailedClaim(t, again, "CLAIM_REPLAY")
		}
		if r := e.bind(t, jws, nil); r.Status != http.StatusOK || r.str("managed_escalation.status") != "PENDING_APPROVAL" {
			t.Fatalf("%s: the MANAGED intent sent again after the return: %s", f.name, r)
		} else {
			after.add(r)
		}
	}
	e.ledgerOK(t)
	t.Logf("approval service down (%s): %d faults (refused, hang %s, 5xx); answers while down: %s; after: %s; "+
		"escalations approved while down %d, resolved %d, grants claimed once %d, double 0, lost %d",
		e2eBackend(t), faults, depTimeout, during, after, owed, resolved, claims, owed-resolved)
}

// deadlineMailer bounds every Send: the mailer's own timeout, as short as
// a test can wait.
type deadlineMailer struct {
	clearance.Mailer
	d time.Duration
}

func (m deadlineMailer) Send(ctx context.Context, msg clearance.MailMessage) error {
	ctx, cancel := context.WithTimeout(ctx, m.d)
	defer cancel()
	return m.Mailer.Send(ctx, msg)
}

// The mail server down: sign-up and sign-in codes answer 503
// MAIL_UNAVAILABLE and leave the store exactly as it was (a code mailed
// before still works, the failed sends count toward no limit); back, both
// go through.
func TestMailServerDownAndBack(t *testing.T) {
	t.Parallel()
	rec := startSMTPRecorder(t)
	front := newFaultFront(t, rec.addr)
	mailer, err := clearance.NewMailer("smtp://"+front.addr, "", signUpFrom, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := newExecEnvWith(t, "", func(x *execEnv) {
		x.secretsKey = testSecretsKey
		x.tune = func(o *clearance.Options) { o.Mailer = deadlineMailer{mailer, depTimeout} }
	})
	signUp := func(addr string) *result {
		return x.req(t, "POST", pathRegisterStart, "", map[string]string{
			"owner_email": addr, "owner_name": "Ada Lovelace", "org_name": "Analytical Engines"}, nil)
	}
	signIn := func(addr string) *result {
		return x.req(t, "POST", signinPathStart, "", map[string]string{"email": addr}, nil)
	}
	const early, fresh, member = "early@example.com", "fresh@example.com", "member@example.com"
	// Before the fault: a code mailed, not used yet.
	signUp(early).want(t, http.StatusAccepted)
	earlyCode := rec.lastCode(t, early)
	before := x.dataFingerprint(t)

	during := tally{}
	faults := 0
	for _, f := range depFaults {
		faults++
		front.set(f.front)
		if f.errors {
			rec.fail.Store(&smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"})
		}
		// More sends than an address is allowed in an hour.
		for range 2 {
			for _, r := range []*result{signUp(early), signUp(fresh), signIn(member)} {
				during.add(r)
				r.wantProblem(t, http.StatusServiceUnavailable, "MAIL_UNAVAILABLE")
			}
		}
		rec.fail.Store(nil)
		front.set(frontUp)
	}
	if after := x.dataFingerprint(t); after != before {
		t.Fatalf("sends that failed changed the store:\nbefore %s\nafter  %s", before, after)
	}
	for _, a := range []string{fresh, member} {
		if n := len(rec.to(t, a)); n != 0 {
			t.Fatalf("%s received %d messages while the mail server was down", a, n)
		}
	}

	after := tally{}
	v := x.req(t, "POST", pathRegisterVerify, "", map[string]string{"owner_email": early, "otp_code": earlyCode}, nil)
	after.add(v)
	if v.Status != http.StatusOK || v.str("org_id") == "" {
		t.Fatalf("the code mailed before the outage, after it: %s", v)
	}
	s := signUp(fresh)
	after.add(s)
	s.want(t, http.StatusAccepted)
	v = x.req(t, "POST", pathRegisterVerify, "", map[string]string{"owner_email": fresh, "otp_code": rec.lastCode(t, fresh)}, nil)
	after.add(v)
	v.want(t, http.StatusOK)
	s = signIn(member)
	after.add(s)
	s.want(t, http.StatusAccepted)
	v = x.req(t, "POST", signinPathVerify, "", map[string]string{"email": member, "otp_code": rec.lastCode(t, member)}, nil)
	after.add(v)
	v.want(t, http.StatusOK)
	t.Logf("mail server down (%s): %d faults (refused, hang %s, SMTP 451); answers while down: %s; after: %s; "+
		"store unchanged by the failed sends; a code mailed before still verified; lost 0",
		e2eBackend(t), faults, depTimeout, during, after)
}

// downRetries outlasts the outage of TestCallbackReceiverDownAndBack:
// twelve attempts a second apart (jittered), moved past with the clock.
var downRetries = slices.Repeat([]time.Duration{time.Second}, 12)

// The receiver of an org's decision callbacks down: decisions are answered
// as ever (their events are owed, not awaited); every attempt while down
// fails and is retried; back, exactly the acknowledged decisions are
// delivered, each with its one delivery id and a valid signature, and none
// is dead-lettered.
func TestCallbackReceiverDownAndBack(t *testing.T) {
	t.Parallel()
	x := newExecEnvWith(t, bandsBundle, func(x *execEnv) {
		x.secretsKey = testSecretsKey
		x.tune = func(o *clearance.Options) {
			o.AllowPrivateDestinations = true
			o.Webhooks = webhook.WorkerOptions{Retries: downRetries, Timeout: depTimeout}
		}
	})
	rv := newReceiver(t)
	front := newFaultFront(t, rv.srv.Listener.Addr().String())
	x.req(t, "POST", hooksPath(x.o.ID)+"/connect", x.o.Key, connectBody("http://"+front.addr+"/hook", hookSecret, ""), nil).
		want(t, http.StatusCreated)

	acked := map[string]bool{} // event ids (evaluation ids) of acknowledged decisions
	decide := func(into tally, amount int) {
		r := x.req(t, "POST", pathEvaluate, x.o.Key, fmt.Sprintf(`{"amount":%d,"workflow_key":"payouts","decision_type":"PAYOUT"}`, amount), nil)
		into.add(r)
		r.want(t, http.StatusOK)
		acked[r.str("evaluation_id")] = true
	}
	pass := func() {
		x.advance(2 * time.Second)
		work(t, x)
	}
	during := tally{}
	faults, amount := 0, 0
	for _, f := range depFaults {
		faults++
		front.set(f.front)
		if f.errors {
			rv.setScript(http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusBadGateway)
		}
		for range 4 {
			amount += 7
			decide(during, amount)
		}
		pass()
		pass()
		if n := len(rv.processedIDs()); n != 0 {
			t.Fatalf("%s: %d deliveries processed while the receiver was down", f.name, n)
		}
		rv.setScript(http.StatusOK)
		front.set(frontUp)
	}
	failed := x.engine.Webhooks.Stats().FailedAttempts
	if failed == 0 {
		t.Fatal("no attempt failed while the receiver was down")
	}
	// Back: the worker's passes deliver what is owed, under a bound.
	passes := 0
	for delivered := 0; delivered < len(acked); delivered = int(x.engine.Webhooks.Stats().Delivered) {
		if passes++; passes > len(downRetries)+2 {
			t.Fatalf("%d of %d events delivered after %d passes", delivered, len(acked), passes-1)
		}
		pass()
	}

	// Exactly the acknowledged set, each with one delivery id, every
	// request signed.
	ids := map[string]map[string]bool{} // event id -> delivery ids
	got := rv.deliveries()
	for _, d := range got {
		var body struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal(d.body, &body); err != nil {
			t.Fatal(err)
		}
		if !acked[body.EventID] {
			t.Fatalf("delivered an event no decision acknowledged: %s", d.body)
		}
		if ok := hmacSignatures(t, d.signature, d.body, hookSecret); len(ok) != 1 {
			t.Fatalf("a delivery's signature does not verify: %q", d.signature)
		}
		if ids[body.EventID] == nil {
			ids[body.EventID] = map[string]bool{}
		}
		ids[body.EventID][d.id] = true
	}
	lost := 0
	for id := range acked {
		switch n := len(ids[id]); {
		case n == 0:
			lost++
		case n > 1:
			t.Errorf("event %s came under %d delivery ids", id, n)
		}
	}
	processed := 0
	for id, n := range rv.processedIDs() {
		processed++
		if n != 1 {
			t.Errorf("delivery %s processed %d times", id, n)
		}
	}
	st := x.engine.Webhooks.Stats()
	if lost != 0 || processed != len(acked) || st.DeadLettered != 0 || st.Dropped != 0 {
		t.Fatalf("lost %d, processed %d of %d, dead-lettered %d, dropped %d", lost, processed, len(acked), st.DeadLettered, st.Dropped)
	}
	for _, d := range x.deliveryLog(t, x.o.Key) {
		if d.State != webhook.StateDelivered {
			t.Fatalf("delivery %s is %s", d.DeliveryID, d.State)
		}
	}
	t.Logf("callback receiver down (%s): %d faults (refused, hang %s, 5xx); decisions while down: %s; "+
		"%d attempts failed, %d requests received, %d of %d events delivered (%d passes after the return), "+
		"dead-lettered %d, lost %d", e2eBackend(t), faults, depTimeout, during, failed, len(got), processed, len(acked),
		passes, st.DeadLettered, lost)
}

// processedIDs is how many times the receiver processed each delivery id.
func (rv *receiver) processedIDs() map[string]int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	out := make(map[string]int, len(rv.processed))
	for k, v := range rv.processed {
		out[k] = v
	}
	return out
}

// dataFingerprint is fingerprint without PostgreSQL's commit markers, the
// store's own record of each write transaction (kept to tell a lost commit
// acknowledgement from a failed commit): a transaction that put back what
// it found leaves one.
func (x *execEnv) dataFingerprint(t *testing.T) string {
	t.Helper()
	fields := strings.Fields(x.fingerprint(t))
	return strings.Join(slices.DeleteFunc(fields, func(f string) bool { return strings.HasPrefix(f, "commit_markers:") }), " ")
}

// frontMode is what a dependency's front does with its connections.
type frontMode = faultproxy.Mode

const (
	frontUp      = faultproxy.Pass      // forwards to the dependency
	frontRefused = faultproxy.Refuse    // every new connection reset at once
	frontHang    = faultproxy.Blackhole // accepted, never answered: the caller's timeout ends it
)

// faultFront stands on a fixed loopback address between Clearance and one
// dependency (an approval service, a mail server, a callback receiver),
// which is reached only through it.
type faultFront struct {
	*faultproxy.Proxy
	addr string
}

// newFaultFront starts a front, up, before target; it stops when t ends.
func newFaultFront(t testing.TB, target string) *faultFront {
	t.Helper()
	p, err := faultproxy.New(target, faultproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &faultFront{Proxy: p, addr: p.Addr()}
}

// set switches the front to m, resetting every live connection first so
// that no pooled connection outlives a fault.
func (f *faultFront) set(m frontMode) {
	f.Reset()
	f.Set(m)
}
