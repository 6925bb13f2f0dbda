package pebblestore

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/clearancehq/clearance/outbox"
	"github.com/clearancehq/clearance/store"
)

// The subscriber count kept in memory is counted again from the disk
// after a restart: subscriptions outlive the process, and so do
// unsubscriptions.
func TestSubscribersAcrossReopen(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	open := func() *Store {
		s, err := Open("db", Options{FS: fs, Logger: quiet{}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	subscribed := func(s *Store, org string) bool {
		var ok bool
		if err := s.Update(ctx, org, func(tx store.Tx) (err error) { ok, err = tx.OutboxSubscribed(ctx); return err }); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	set := func(s *Store, org, name string, on bool) {
		if err := s.Update(ctx, org, func(tx store.Tx) error { return tx.SetOutboxSubscriber(ctx, name, on) }); err != nil {
			t.Fatal(err)
		}
	}
	s := open()
	set(s, "org_a", "webhook", true)
	set(s, "org_a", "connector", true)
	set(s, "org_b", "webhook", true)
	set(s, "org_b", "webhook", false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	if !subscribed(s, "org_a") || subscribed(s, "org_b") || subscribed(s, "org_c") {
		t.Fatal("subscriptions did not survive a restart as written")
	}
	set(s, "org_a", "webhook", false)
	s.forget("org_a")
	if !subscribed(s, "org_a") {
		t.Fatal("org_a lost its second subscriber")
	}
	set(s, "org_a", "connector", false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	if subscribed(s, "org_a") {
		t.Fatal("an unsubscription did not survive a restart")
	}
	if err := s.Update(ctx, "org_a", func(tx store.Tx) error { return tx.SetOutboxSubscriber(ctx, "Bad Name", true) }); !errors.Is(err, outbox.ErrInvalid) {
		t.Fatal("an invalid subscriber name was stored")
	}
}
