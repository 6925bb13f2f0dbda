package coded

import (
	"errors"
	"io"
	"testing"
)

func TestNewKeepsSentinelCauseAndCode(t *testing.T) {
	sentinel := errors.New("lease expired")
	err := New("CLAIM_LEASE_EXPIRED", sentinel, "grant %q: %w", "g1", io.EOF)
	if !errors.Is(err, sentinel) || !errors.Is(err, io.EOF) {
		t.Fatal("sentinel or cause lost")
	}
	if err.Code() != "CLAIM_LEASE_EXPIRED" || err.Error() != `lease expired: grant "g1": EOF` {
		t.Fatalf("code %q, message %q", err.Code(), err.Error())
	}
	var target *Error
	if !errors.As(error(err), &target) || (&Error{code: "X"}).Error() != "X" {
		t.Fatal("As or bare Error is wrong")
	}
}
