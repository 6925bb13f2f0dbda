package approver

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/clearancehq/clearance/grant"
)

// TestApproveAndDeny runs both decisions end to end with a software
// authenticator, and checks each receipt.
func TestApproveAndDeny(t *testing.T) {
	for _, decision := range []Status{StatusApproved, StatusDenied} {
		t.Run(string(decision), func(t *testing.T) {
			h := newHarness(t)
			alice := h.enroll(orgA, credA, "alice@example.com")
			r := h.open(orgA, credA, "esc-1")
			h.clock.Advance(2 * time.Minute)
			opts := parseAssertionOptions(t, h.begin(r, decision))
			if opts.PublicKey.UserVerification != "required" || opts.PublicKey.RPID != testRPID ||
				len(opts.PublicKey.AllowCredentials) != 1 || opts.PublicKey.AllowCredentials[0].ID != b64.EncodeToString(alice.credID) {
				t.Fatalf("assertion options: %+v", opts)
			}
			res := h.finish(r, decision, alice.assertChallenge(t, opts.PublicKey.Challenge))
			if res.Status != http.StatusOK {
				t.Fatalf("finish: %d %s", res.Status, res.Body)
			}
			var out decided
			res.json(t, &out)
			if out.Status != decision || out.Approver != "alice@example.com" || !out.DecidedAt.Equal(h.clock.Now()) {
				t.Errorf("finish answered %+v", out)
			}
			got := h.get(credA, r.RequestID)
			if got.Status != decision || got.Approver != "alice@example.com" || got.DecidedAt == nil || !got.DecidedAt.Equal(h.clock.Now()) {
				t.Fatalf("after the decision: %+v", got)
			}
			rc, kid, err := grant.VerifyApprovalReceipt(got.Receipt, jwksLookup(t, h.svc), "https://approvals.example.test/issuer")
			if err != nil {
				t.Fatalf("receipt: %v", err)
			}
			want := grant.ApprovalReceipt{Issuer: "https://approvals.example.test/issuer", Audience: grant.AudApproval, ID: rc.ID,
				RequestID: r.RequestID, OrgID: orgA, IntentHash: testIntent, Approver: "alice@example.com",
				Decision: string(decision), Presence: grant.PresenceWebAuthnUV, IssuedAt: h.clock.Now().Unix()}
			if rc != want || kid != h.key.KID() || len(rc.ID) < 20 {
				t.Errorf("receipt %+v (kid %s), want %+v", rc, kid, want)
			}
			if d := h.decided(); len(d) != 1 || d[0].RequestID != r.RequestID || d[0].Status != decision || d[0].Receipt != got.Receipt {
				t.Errorf("OnDecision saw %+v", d)
			}
		})
	}
}

// refused asserts a refusal with status and code, and that the request is
// still PENDING with nothing decided.
func (h *harness) refused(res response, status int, code string, r ApprovalRequest) {
	h.t.Helper()
	if res.Status != status || res.code(h.t) != code {
		h.t.Fatalf("got %d %s, want %d %s", res.Status, res.Body, status, code)
	}
	if got := h.get(credA, r.RequestID); got.Status != StatusPending || got.Receipt != "" || got.Approver != "" || got.DecidedAt != nil {
		h.t.Fatalf("a refused ceremony changed the request: %+v", got)
	}
	if d := h.decided(); len(d) != 0 {
		h.t.Fatalf("a refused ceremony reached OnDecision: %+v", d)
	}
}

func TestAssertionRefusals(t *testing.T) {
	t.Run("user verification flag cleared", func(t *testing.T) {
		h := newHarness(t)
		a := h.enroll(orgA, credA, "alice")
		r := h.open(orgA, credA, "esc-1")
		a.noUV = true
		h.refused(h.finish(r, StatusApproved, a.assert(t, h.begin(r, StatusApproved))), http.StatusForbidden, CodeUserVerificationRequired, r)
	})
	t.Run("wrong origin", func(t *testing.T) {
		h := newHarness(t)
		a := h.enroll(orgA, credA, "alice")
		r := h.open(orgA, credA, "esc-1")
		a.originOver = "https://approvals.example.test.evil.example"
		h.refused(h.finish(r, StatusApproved, a.assert(t, h.begin(r, StatusApproved))), http.StatusForbidden, CodeAssertionRefused, r)
	})
	t.Run("relying party of another site", func(t *testing.T) {
		h := newHarness(t)
		a := h.enroll(orgA, credA, "alice")
		r := h.open(orgA, credA, "esc-1")
		a.rpID = "evil.example"
		h.refused(h.finish(r, StatusApproved, a.assert(t, h.begin(r, StatusApproved))), http.StatusForbidden, CodeAssertionRefused, r)
	})
	t.Run("signature tampered", func(t *testing.T) {
		h := newHarness(t)
		a := h.enroll(orgA, credA, "alice")
		r := h.open(orgA, credA, "esc-1")
		raw := a.assert(t, h.begin(r, StatusApproved))
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		resp := v["response"].(map[string]any)
		sig, _ := b64.DecodeString(resp["signature"].(string))
		sig[len(sig)-1] ^= 1
		resp["signature"] = b64.EncodeToString(sig)
		raw, _ = json.Marshal(v)
		h.refused(h.finish(r, StatusApproved, raw), http.StatusForbidden, CodeAssertionRefused, r)
	})
	t.Run("replayed challenge", func(t *testing.T) {
		h := newHarness(t)
		a := h.enroll(orgA, credA, "alice")
		r := h.open(orgA, credA, "esc-1")
		ch := parseAssertionOptions(t, h.begin(r, StatusApproved)).PublicKey.Challenge
		// A refused attempt uses the challenge up: a good assertion over it
		// is refused afterwards.
		a.noUV = true
		h.refused(h.finish(r, StatusApproved, a.assertChallenge(t, ch)), http.StatusForbidden, CodeUserVerificationRequired, r)
		a.noUV = false
		h.refused(h.finish(r, StatusApproved, a.assertChallenge(t, ch)), http.StatusBadRequest, CodeChallengeInvalid, r)
		// A challenge the service never issued.
		h.refused(h.finish(r, StatusApproved, a.assertChallenge(t, b64.EncodeToString([]byte("0123456789abcdef0123456789abcdef")))),
			http.StatusBadRequest, CodeChallengeInvalid, r)
	})
	t.Run("replayed on another request", func(t *testing.T) {
		h := newHarness(t)
		a := h.enroll(orgA, credA, "alice")
		r1 := h.open(orgA, credA, "esc-1")
		r2 := h.open(orgA, credA, "esc-2")
		// The assertion over r1's challenge, posted at r2's link.
		h.refused(h.finish(r2, StatusApproved, a.assert(t, h.begin(r1, StatusApproved))), http.StatusBadRequest, CodeChallengeInvalid, r2)
		if got := h.get(credA, r1.RequestID); got.Status != StatusPending {
			t.Fatalf("r1 changed: %+v", got)
		}
	})
	t.Run("approve challenge used to deny", func(t *testing.T) {
		h := newHarness(t)
		a := h.enroll(orgA, credA, "alice")
		r := h.open(orgA, credA, "esc-1")
		ch := parseAssertionOptions(t, h.begin(r, StatusApproved)).PublicKey.Challenge
		h.refused(h.finish(r, StatusDenied, a.assertChallenge(t, ch)), http.StatusBadRequest, CodeChallengeInvalid, r)
		// ... and it is used up by the attempt.
		h.refused(h.finish(r, StatusApproved, a.assertChallenge(t, ch)), http.StatusBadRequest, CodeChallengeInvalid, r)
	})
	t.Run("passkey of another org's approver", func(t *testing.T) {
		h := newHarness(t)
		h.enroll(orgA, credA, "alice")
		mallory := h.enroll(orgB, credB, "mallory")
		r := h.open(orgA, credA, "esc-1")
		opts := parseAssertionOptions(t, h.begin(r, StatusApproved))
		for _, c := range opts.PublicKey.AllowCredentials {
			if c.ID == b64.EncodeToString(mallory.credID) {
				t.Fatal("another org's passkey is allowed")
			}
		}
		h.refused(h.finish(r, StatusApproved, mallory.assertChallenge(t, opts.PublicKey.Challenge)), http.StatusForbidden, CodeUnknownCredential, r)
	})
	t.Run("unknown passkey", func(t *testing.T) {
		h := newHarness(t)
		h.enroll(orgA, credA, "alice")
		stranger := newSoftAuthenticator(t, testRPID, testOrigin)
		r := h.open(orgA, credA, "esc-1")
		h.refused(h.finish(r, StatusApproved, stranger.assert(t, h.begin(r, StatusApproved))), http.StatusForbidden, CodeUnknownCredential, r)
	})
	t.Run("counter regression", func(t *testing.T) {
		h := newHarness(t)
		a := h.enroll(orgA, credA, "alice")
		first := h.open(orgA, credA, "esc-0")
		a.counter = 9
		h.decide(first, StatusApproved, a) // counter 10 stored
		h.decisions = nil
		r := h.open(orgA, credA, "esc-1")
		a.counter = 9 // the next assertion says 10 again: a clone
		h.refused(h.finish(r, StatusApproved, a.assert(t, h.begin(r, StatusApproved))), http.StatusForbidden, CodeCounterRegression, r)
		a.counter = 3
		h.refused(h.finish(r, StatusApproved, a.assert(t, h.begin(r, StatusApproved))), http.StatusForbidden, CodeCounterRegression, r)
		a.counter = 10
		h.decide(r, StatusApproved, a) // 11 advances
	})
	t.Run("decision not known", func(t *testing.T) {
		h := newHarness(t)
		a := h.enroll(orgA, credA, "alice")
		r := h.open(orgA, credA, "esc-1")
		res := h.pagePost(h.path(r.ApprovalURL)+"/begin", map[string]any{"decision": "MAYBE"})
		h.refused(res, http.StatusBadRequest, CodeInvalidDecision, r)
		h.refused(h.finish(r, "approved", a.assert(t, h.begin(r, StatusApproved))), http.StatusBadRequest, CodeInvalidDecision, r)
	})
	t.Run("malformed assertion", func(t *testing.T) {
		h := newHarness(t)
		h.enroll(orgA, credA, "alice")
		r := h.open(orgA, credA, "esc-1")
		h.refused(h.finish(r, StatusApproved, []byte(`{"id":"x","type":"public-key"}`)), http.StatusBadRequest, CodeCredentialInvalid, r)
		h.refused(h.pagePost(h.path(r.ApprovalURL)+"/finish", map[string]any{"decision": "APPROVED"}), http.StatusBadRequest, CodeMissingField, r)
		h.refused(h.pagePost(h.path(r.ApprovalURL)+"/finish", map[string]any{"decision": "APPROVED", "assertion": map[string]any{}, "extra": 1}),
			http.StatusBadRequest, "UNKNOWN_MEMBER", r)
		h.refused(serve(h.svc, http.MethodPost, h.path(r.ApprovalURL)+"/begin", "", `{"decision":"APPROVED"}`, "text/plain"),
			http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, r)
	})
}

// TestZeroCounter: an authenticator without a signature counter (always
// 0) may decide again and again.
func TestZeroCounter(t *testing.T) {
	h := newHarness(t)
	a := h.enroll(orgA, credA, "alice")
	a.zeroCount = true
	for _, esc := range []string{"esc-1", "esc-2"} {
		h.decide(h.open(orgA, credA, esc), StatusApproved, a)
	}
}

// TestFirstDecisionWins: after a decision every other ceremony is refused,
// including one begun before it.
func TestFirstDecisionWins(t *testing.T) {
	h := newHarness(t)
	alice := h.enroll(orgA, credA, "alice")
	bob := h.enroll(orgA, credA, "bob")
	r := h.open(orgA, credA, "esc-1")
	early := h.begin(r, StatusDenied)
	h.decide(r, StatusApproved, alice)
	res := h.finish(r, StatusDenied, bob.assert(t, early))
	if res.Status != http.StatusConflict || res.code(t) != CodeAlreadyDecided {
		t.Fatalf("second decision: %d %s", res.Status, res.Body)
	}
	res = h.pagePost(h.path(r.ApprovalURL)+"/begin", map[string]any{"decision": "DENIED"})
	if res.Status != http.StatusConflict || res.code(t) != CodeAlreadyDecided {
		t.Fatalf("begin after the decision: %d %s", res.Status, res.Body)
	}
	if got := h.get(credA, r.RequestID); got.Status != StatusApproved || got.Approver != "alice" {
		t.Fatalf("request %+v", got)
	}
	if len(h.decided()) != 1 {
		t.Fatalf("OnDecision called %d times", len(h.decided()))
	}
}

// TestConcurrentFinishes: 32 valid ceremonies finished at once, half of
// them approving and half denying: exactly one decision is recorded, the
// others are refused with 409, and the winner is the one recorded.
func TestConcurrentFinishes(t *testing.T) {
	h := newHarness(t)
	approvers := []*softAuthenticator{h.enroll(orgA, credA, "alice"), h.enroll(orgA, credA, "bob")}
	r := h.open(orgA, credA, "esc-1")
	const n = 32
	type attempt struct {
		decision Status
		body     []byte
	}
	attempts := make([]attempt, n)
	for i := range attempts {
		d := StatusApproved
		if i%2 == 1 {
			d = StatusDenied
		}
		attempts[i] = attempt{d, approvers[i%2].assert(t, h.begin(r, d))}
	}
	// Every finish verifies before any records: they all race for the
	// decision itself.
	h.svc.afterVerify = barrier(t, n)
	results := make([]response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range attempts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = h.finish(r, attempts[i].decision, attempts[i].body)
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, res := range results {
		switch {
		case res.Status == http.StatusOK:
			if winner >= 0 {
				t.Fatalf("two decisions recorded: %d and %d", winner, i)
			}
			winner = i
		case res.Status == http.StatusConflict && res.code(t) == CodeAlreadyDecided:
		default:
			t.Errorf("attempt %d: %d %s", i, res.Status, res.Body)
		}
	}
	if winner < 0 {
		t.Fatal("no decision recorded")
	}
	got := h.get(credA, r.RequestID)
	wantApprover := []string{"alice", "bob"}[winner%2]
	if got.Status != attempts[winner].decision || got.Approver != wantApprover {
		t.Errorf("recorded %s by %s, the winner was %s by %s", got.Status, got.Approver, attempts[winner].decision, wantApprover)
	}
	if d := h.decided(); len(d) != 1 || d[0].Status != got.Status {
		t.Errorf("OnDecision saw %+v", d)
	}
}

// barrier returns a function that blocks until n calls are waiting in it.
func barrier(t *testing.T, n int) func() {
	var mu sync.Mutex
	waiting := 0
	all := make(chan struct{})
	return func() {
		mu.Lock()
		waiting++
		if waiting == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			t.Error("barrier: not every ceremony reached the decision")
		}
	}
}

// TestConcurrentClonedCounter: a cloned passkey used at once on two
// requests with the same counter value decides one of them only.
func TestConcurrentClonedCounter(t *testing.T) {
	h := newHarness(t)
	a := h.enroll(orgA, credA, "alice")
	r1, r2 := h.open(orgA, credA, "esc-1"), h.open(orgA, credA, "esc-2")
	o1, o2 := h.begin(r1, StatusApproved), h.begin(r2, StatusApproved)
	a1 := a.assert(t, o1)
	a.counter-- // the clone signs with the same counter
	a2 := a.assert(t, o2)
	h.svc.afterVerify = barrier(t, 2)
	var res [2]response
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); res[0] = h.finish(r1, StatusApproved, a1) }()
	go func() { defer wg.Done(); res[1] = h.finish(r2, StatusApproved, a2) }()
	wg.Wait()
	ok, refused := 0, 0
	for _, r := range res {
		switch {
		case r.Status == http.StatusOK:
			ok++
		case r.Status == http.StatusForbidden && r.code(t) == CodeCounterRegression:
			refused++
		default:
			t.Errorf("%d %s", r.Status, r.Body)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("%d decided, %d refused", ok, refused)
	}
}

// TestChallengesPerRequestBounded: begins on one request beyond the bound
// forget the oldest challenge.
func TestChallengesPerRequestBounded(t *testing.T) {
	h := newHarness(t)
	a := h.enroll(orgA, credA, "alice")
	r := h.open(orgA, credA, "esc-1")
	first := h.begin(r, StatusApproved)
	for range maxChallengesPerRequest {
		h.begin(r, StatusApproved)
	}
	h.refused(h.finish(r, StatusApproved, a.assert(t, first)), http.StatusBadRequest, CodeChallengeInvalid, r)
	h.decide(r, StatusApproved, a)
}

func TestChallengeExpires(t *testing.T) {
	h := newHarness(t)
	a := h.enroll(orgA, credA, "alice")
	r := h.open(orgA, credA, "esc-1")
	opts := h.begin(r, StatusApproved)
	h.clock.Advance(DefaultChallengeTTL)
	h.refused(h.finish(r, StatusApproved, a.assert(t, opts)), http.StatusBadRequest, CodeChallengeInvalid, r)
}

func TestNoApprovers(t *testing.T) {
	h := newHarness(t)
	h.enroll(orgB, credB, "bob") // another org's approver does not count
	h.enrollmentLink(credA, "alice-without-passkey")
	r := h.open(orgA, credA, "esc-1")
	res := h.pagePost(h.path(r.ApprovalURL)+"/begin", map[string]any{"decision": "APPROVED"})
	h.refused(res, http.StatusConflict, CodeNoApprovers, r)
}

func TestEnrollment(t *testing.T) {
	t.Run("link works once", func(t *testing.T) {
		h := newHarness(t)
		a := newSoftAuthenticator(t, testRPID, testOrigin)
		link := h.enrollmentLink(credA, "alice")
		if res := serve(h.svc, http.MethodGet, link, "", nil, ""); res.Status != http.StatusOK {
			t.Fatalf("enrollment page: %d", res.Status)
		}
		opts := h.pagePost(link+"/begin", map[string]any{})
		if res := h.pagePost(link+"/finish", map[string]any{"credential": json.RawMessage(a.register(t, opts.Body))}); res.Status != http.StatusOK {
			t.Fatalf("finish: %d %s", res.Status, res.Body)
		}
		for _, res := range []response{h.pagePost(link+"/begin", map[string]any{}), serve(h.svc, http.MethodGet, link, "", nil, "")} {
			if res.Status != http.StatusNotFound {
				t.Errorf("used link: %d %s", res.Status, res.Body)
			}
		}
	})
	t.Run("link expires", func(t *testing.T) {
		h := newHarness(t)
		link := h.enrollmentLink(credA, "alice")
		h.clock.Advance(DefaultEnrollmentTTL)
		if res := h.pagePost(link+"/begin", map[string]any{}); res.Status != http.StatusNotFound || res.code(t) != CodeLinkInvalid {
			t.Fatalf("expired link: %d %s", res.Status, res.Body)
		}
	})
	t.Run("user verification required", func(t *testing.T) {
		h := newHarness(t)
		a := newSoftAuthenticator(t, testRPID, testOrigin)
		a.noUV = true
		link := h.enrollmentLink(credA, "alice")
		opts := h.pagePost(link+"/begin", map[string]any{})
		res := h.pagePost(link+"/finish", map[string]any{"credential": json.RawMessage(a.register(t, opts.Body))})
		if res.Status != http.StatusForbidden || res.code(t) != CodeUserVerificationRequired {
			t.Fatalf("registration without UV: %d %s", res.Status, res.Body)
		}
		// The link survives a refused attempt; the challenge does not.
		a.noUV = false
		res = h.pagePost(link+"/finish", map[string]any{"credential": json.RawMessage(a.register(t, opts.Body))})
		if res.Status != http.StatusBadRequest || res.code(t) != CodeChallengeInvalid {
			t.Fatalf("challenge reused: %d %s", res.Status, res.Body)
		}
		opts = h.pagePost(link+"/begin", map[string]any{})
		if res := h.pagePost(link+"/finish", map[string]any{"credential": json.RawMessage(a.register(t, opts.Body))}); res.Status != http.StatusOK {
			t.Fatalf("registration: %d %s", res.Status, res.Body)
		}
	})
	t.Run("wrong origin", func(t *testing.T) {
		h := newHarness(t)
		a := newSoftAuthenticator(t, testRPID, testOrigin)
		a.originOver = "https://evil.example"
		link := h.enrollmentLink(credA, "alice")
		opts := h.pagePost(link+"/begin", map[string]any{})
		res := h.pagePost(link+"/finish", map[string]any{"credential": json.RawMessage(a.register(t, opts.Body))})
		if res.Status != http.StatusForbidden || res.code(t) != CodeAssertionRefused {
			t.Fatalf("registration from another origin: %d %s", res.Status, res.Body)
		}
	})
	t.Run("a passkey enrolled twice", func(t *testing.T) {
		h := newHarness(t)
		a := h.enroll(orgA, credA, "alice")
		link := h.enrollmentLink(credB, "mallory")
		opts := h.pagePost(link+"/begin", map[string]any{})
		res := h.pagePost(link+"/finish", map[string]any{"credential": json.RawMessage(a.register(t, opts.Body))})
		if res.Status != http.StatusConflict || res.code(t) != CodeCredentialExists {
			t.Fatalf("the same passkey for another org: %d %s", res.Status, res.Body)
		}
	})
	t.Run("several passkeys per approver", func(t *testing.T) {
		h := newHarness(t)
		laptop := h.enroll(orgA, credA, "alice")
		phone := newSoftAuthenticator(t, testRPID, testOrigin)
		h.enrollWith(phone, credA, "alice")
		r := h.open(orgA, credA, "esc-1")
		opts := parseAssertionOptions(t, h.begin(r, StatusApproved))
		var ids []string
		for _, c := range opts.PublicKey.AllowCredentials {
			ids = append(ids, c.ID)
		}
		slices.Sort(ids)
		want := []string{b64.EncodeToString(laptop.credID), b64.EncodeToString(phone.credID)}
		slices.Sort(want)
		if !slices.Equal(ids, want) {
			t.Fatalf("allowed %v, want %v", ids, want)
		}
		h.decide(r, StatusApproved, phone)
		if got := h.get(credA, r.RequestID); got.Approver != "alice" {
			t.Fatalf("approver %q", got.Approver)
		}
	})
}
