package approval_test

import (
	"context"
	"errors"
	"testing"

	"github.com/clearancehq/clearance/approval"
	"github.com/clearancehq/clearance/internal/core"
)

// TestErrorsTranslate: the kernel keeps an approval error's code and gives
// it the Kind the caller answers with: 409 for evidence that proves no
// approval, 503 for a service that cannot be asked.
func TestErrorsTranslate(t *testing.T) {
	ctx := context.Background()
	e := setup(t)
	id := e.open(t, "esc-1", intentA).RequestID
	e.fake.Deny(id, "alice")
	want := approval.Binding{OrgID: "org-1", IntentHash: intentA}
	_, notApproved := approval.Verify(ctx, e.svc, e.ep, id, want)
	_, invalid := approval.Verify(ctx, e.svc, e.ep, id, approval.Binding{OrgID: "org-1", IntentHash: intentB})
	_, notFound := e.svc.Get(ctx, e.ep, "apr_9999")
	_, badInput := e.svc.Get(ctx, e.ep, "..")
	_, notConfigured := approval.Static{}.Endpoint(ctx, "org-1")
	e.fake.Close()
	_, down := approval.Verify(ctx, e.svc, e.ep, id, want)
	for _, c := range []struct {
		err, sentinel, kind error
		code                string
	}{
		{notApproved, approval.ErrNotApproved, core.ErrConflict, approval.CodeNotApproved},
		{invalid, approval.ErrEvidenceInvalid, core.ErrConflict, approval.CodeEvidenceInvalid},
		{notFound, approval.ErrNotFound, core.ErrNotFound, approval.CodeNotFound},
		{badInput, approval.ErrInvalidRequest, core.ErrInvalidRequest, approval.CodeInvalidRequest},
		{notConfigured, approval.ErrNotConfigured, core.ErrUnavailable, approval.CodeNotConfigured},
		{down, approval.ErrUnavailable, core.ErrUnavailable, approval.CodeUnavailable},
	} {
		if !errors.Is(c.err, c.sentinel) || !errors.Is(c.err, c.kind) {
			t.Errorf("%v: want %v of kind %v", c.err, c.sentinel, c.kind)
		}
		var ce *core.Error
		if err := core.Translate("verify approval", c.err); !errors.As(err, &ce) || ce.Kind != c.kind || ce.Code != c.code {
			t.Errorf("Translate(%v) = %v, want kind %v code %s", c.err, err, c.kind, c.code)
		}
	}
	var ae *approval.Error
	if !errors.As(notApproved, &ae) || ae.Status != approval.StatusDenied || ae.Kind() != core.ErrConflict {
		t.Fatalf("%+v", ae)
	}
}
