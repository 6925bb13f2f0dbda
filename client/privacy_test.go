package client_test

import (
	"net/http"
	"testing"

	"github.com/clearancehq/clearance/client"
)

// Personal data sealed per subject, one subject erased, then the org's.
func TestPersonalData(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	o := s.newOrg("Privacy")
	ctx := t.Context()

	_, err := o.c.DataProtection(ctx, o.ID)
	wantCode(t, err, http.StatusNotFound, "DATA_PROTECTION_NOT_SET")
	set, err := o.c.PutDataProtection(ctx, o.ID, client.DataProtectionRequest{Subject: "/actor/id", Personal: &[]string{"/action/target"}})
	if err != nil || set.Subject != "/actor/id" || len(set.Personal) != 1 || set.OrgId != o.ID {
		t.Fatalf("put setting %+v: %v", set, err)
	}
	read, err := o.c.DataProtection(ctx, o.ID)
	if err != nil || read.LedgerSeq != set.LedgerSeq {
		t.Fatalf("read setting %+v: %v", read, err)
	}
	d := o.decide(t, 10)

	receipt, err := o.c.EraseSubject(ctx, o.ID, client.ErasureRequest{SubjectId: ptr("agent-7")})
	if err != nil || receipt.Payload.Scope != "SUBJECT" || receipt.Payload.DossiersAffected != 1 || len(receipt.Payload.KeysDestroyed) != 1 ||
		receipt.Receipt == "" || receipt.Replayed {
		t.Fatalf("erase a subject %+v: %v", receipt, err)
	}
	var got client.Response
	if _, err := o.c.Dossier(ctx, d.DossierId.String(), client.Received(&got)); err != nil || got.Header.Get("X-Clearance-Personal-Data") != "ERASED" {
		t.Fatalf("the erased subject's dossier (%v): %v", got.Header, err)
	}

	off, err := o.c.DeleteDataProtection(ctx, o.ID)
	if err != nil || off.Subject != "" || len(off.Personal) != 0 || off.LedgerSeq <= set.LedgerSeq {
		t.Fatalf("delete setting %+v: %v", off, err)
	}
	org, err := s.client(s.platform).EraseOrgPersonalData(ctx, o.ID, client.ErasureRequest{})
	if err != nil || org.Payload.Scope != "ORG" || org.Payload.OrgId != o.ID {
		t.Fatalf("erase the org's personal data %+v: %v", org, err)
	}
}
