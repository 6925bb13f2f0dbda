-- 0010_outbox_subscribers: the destinations an org's events are owed to
-- (outbox.Subscribe). A transaction reads whether its org has any with the
-- org's lock, in the same round trip, so a decision learns whether it owes
-- an event without a query of its own.
CREATE TABLE IF NOT EXISTS outbox_subscribers (
	org_id text NOT NULL,
	name   text NOT NULL,
	PRIMARY KEY (org_id, name)
);
