package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/claim"
	"github.com/clearancehq/clearance/idempotency"
	"github.com/clearancehq/clearance/internal/coded"
	"github.com/clearancehq/clearance/internal/outbound"
	"github.com/clearancehq/clearance/internal/strictjson"
	"github.com/clearancehq/clearance/policy"
	"github.com/clearancehq/clearance/registry"
	"github.com/clearancehq/clearance/store"
	"github.com/clearancehq/clearance/store/pebblestore"
	"github.com/clearancehq/clearance/tenant"
)

func TestTranslate(t *testing.T) {
	storeDown := errors.New("connection refused")
	for _, c := range []struct {
		name       string
		err        error
		kind       error
		code, prop string
	}{
		{"an *Error passes through", Invalid("X_CODE", "f", "bad"), ErrInvalidRequest, "X_CODE", ""},
		{"a claim refusal is a conflict", coded.New(claim.CodeReplay, claim.ErrReplay, "grant g"), ErrConflict, claim.CodeReplay, ""},
		{"an invalid finalization is a 400", coded.New(claim.CodeInvalidFinalization, claim.ErrInvalidFinalization, "x"), ErrInvalidRequest, claim.CodeInvalidFinalization, ""},
		{"a kid in use is a conflict", coded.New(registry.CodeKIDInUse, registry.ErrKIDInUse, "k"), ErrConflict, registry.CodeKIDInUse, ""},
		{"a reused idempotency key", coded.Of(idempotency.CodeKeyReused, idempotency.ErrKeyReused), ErrConflict, CodeIdempotencyKeyReused, ""},
		{"strict JSON keeps its code and field", &strictjson.Error{Code: strictjson.CodeDuplicate, Detail: "dup", Field: "/a"}, ErrInvalidRequest, strictjson.CodeDuplicate, "/a"},
		{"policy input keeps its code and field", &policy.InputError{Code: policy.CodeInvalidAmount, Field: "amount", Message: "m"}, ErrInvalidRequest, policy.CodeInvalidAmount, "amount"},
		{"a bundle that does not validate is 422", &policy.ValidationError{Problems: []policy.Problem{{RuleID: "r", Field: "rules[0]", Message: "m"}}}, ErrUnprocessable, CodePolicyInvalid, "rules[0]"},
		{"a store failure is 503", fmt.Errorf("read: %w", storeDown), ErrUnavailable, CodeStoreUnavailable, ""},
		{"a wrapped corrupt record is 503", fmt.Errorf("x: %w", store.ErrCorrupt), ErrUnavailable, CodeStoreUnavailable, ""},
		{"a store refusing writes is 503", fmt.Errorf("x: %w", store.ErrWritesRefused), ErrUnavailable, CodeStoreUnavailable, ""},
		{"a kinded feature error keeps its kind and code", fmt.Errorf("x: %w", kindedErr{"APPROVAL_X", ErrConflict}), ErrConflict, "APPROVAL_X", ""},
		{"and its code when unavailable", kindedErr{"APPROVAL_DOWN", ErrUnavailable}, ErrUnavailable, "APPROVAL_DOWN", ""},
		{"a kinded error without a Kind is a 503", kindedErr{"ODD", errors.New("not a kind")}, ErrUnavailable, CodeStoreUnavailable, ""},
	} {
		err := Translate("op", c.err)
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, c.kind) || e.Code != c.code {
			t.Errorf("%s: Translate = %v; want kind %v code %s", c.name, err, c.kind, c.code)
			continue
		}
		if c.prop != "" && (len(e.Fields) == 0 || e.Fields[0].Field != c.prop) {
			t.Errorf("%s: fields %+v, want %s", c.name, e.Fields, c.prop)
		}
	}
	if Translate("op", nil) != nil || TranslateInput(nil) != nil {
		t.Error("nil must stay nil")
	}
	if err := TranslateInput(errors.New("odd input")); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("TranslateInput of an unknown error = %v, want 400", err)
	}
}

// TestUnavailableSaysWritesAreRefused: a refusal of a failing store keeps
// the code clients retry and points at the health answer.
func TestUnavailableSaysWritesAreRefused(t *testing.T) {
	e := Unavailable("decision", fmt.Errorf("pebblestore: %w: disk full", store.ErrWritesRefused))
	if e.Code != CodeStoreUnavailable || !strings.Contains(e.Detail, "refuses writes") || !strings.Contains(e.Detail, "/v1/health") {
		t.Fatalf("refusal: %+v", e)
	}
	if d := Unavailable("decision", errors.New("down")).Detail; strings.Contains(d, "refuses writes") {
		t.Fatalf("another failure: %s", d)
	}
}

// kindedErr is a feature's error that names its own Kind.
type kindedErr struct {
	code string
	kind error
}

func (e kindedErr) Error() string { return e.code }
func (e kindedErr) Code() string  { return e.code }
func (e kindedErr) Kind() error   { return e.kind }

func TestKindOfOutbound(t *testing.T) {
	for _, c := range []struct{ err, kind error }{
		{outbound.ErrInvalidURL, ErrInvalidRequest},
		{outbound.ErrBlockedDestination, ErrInvalidRequest},
		{outbound.ErrRedirect, ErrUnavailable},
		{outbound.ErrResponseTooLarge, ErrUnavailable},
		{fmt.Errorf("GET x: %w: %w", outbound.ErrUnreachable, errors.New("reset")), ErrUnavailable},
	} {
		if k, ok := KindOf(c.err); !ok || k != c.kind {
			t.Errorf("KindOf(%v) = %v, want %v", c.err, k, c.kind)
		}
	}
	if k, ok := KindOf(kindedErr{"X", ErrNotFound}); !ok || k != ErrNotFound {
		t.Errorf("a kinded error: %v %v", k, ok)
	}
}

func TestCallerValidate(t *testing.T) {
	ok := Caller{OrgID: "o", IdempotencyKey: "k-1", CorrelationID: "c.1", RequestID: "r_1"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		caller Caller
		code   string
	}{
		{Caller{IdempotencyKey: "a b"}, CodeInvalidIdempotencyKey},
		{Caller{CorrelationID: "corr\x00"}, CodeInvalidCorrelationID},
		{Caller{CorrelationID: "zero\u200bwidth"}, CodeInvalidCorrelationID},
		{Caller{RequestID: string(bytes.Repeat([]byte("r"), MaxKeyLength+1))}, CodeInvalidRequestID},
	} {
		var e *Error
		if err := c.caller.Validate(); !errors.As(err, &e) || e.Code != c.code || !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%+v: %v, want %s", c.caller, err, c.code)
		}
	}
}

func TestStoreRefusesUnknownOrgs(t *testing.T) {
	ctx := context.Background()
	b, err := pebblestore.Open("", pebblestore.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := NewStore(b)
	const org = "0190a5b2-0000-7000-8000-0000000000c1"
	ran := false
	err = s.Update(ctx, org, func(store.Tx) error { ran = true; return nil })
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeOrgNotFound || ran {
		t.Fatalf("Update of an unknown org = %v (fn ran: %v), want ORG_NOT_FOUND without running", err, ran)
	}
	if grown := s.TakeGrown(); len(grown) != 0 {
		t.Fatalf("a refused Update marked %v grown", grown)
	}
	if err := s.UpdateNew(ctx, org, func(tx store.Tx) error {
		return tx.PutOrg(ctx, tenant.Org{ID: org, Name: "o"})
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, org, func(store.Tx) error { return nil }); err != nil {
		t.Fatalf("Update of a created org: %v", err)
	}
	if grown := s.TakeGrown(); len(grown) != 1 || grown[0] != org {
		t.Fatalf("grown = %v, want [%s]", grown, org)
	}
	if _, err := ReadOrg(ctx, b, "not-a-uuid"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadOrg of a non-UUID = %v", err)
	}
}
