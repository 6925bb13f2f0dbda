-- 0005_policy_activations: each org's active policy bundle version, the
-- only one that authorizes (store.Activation). An org without a row has no
-- active version: the starter policy applies.
--
-- Before activations were recorded, an org's newest published bundle was
-- its active one: those orgs get it as their activation, with ledger_seq 0
-- (no ledger entry recorded it).
CREATE TABLE policy_activations (
    org_id       text COLLATE "C" NOT NULL PRIMARY KEY,
    version      text COLLATE "C" NOT NULL,
    activated_at timestamptz NOT NULL,
    ledger_seq   bigint NOT NULL CHECK (ledger_seq >= 0),
    FOREIGN KEY (org_id, version) REFERENCES bundles (org_id, version)
);
INSERT INTO policy_activations (org_id, version, activated_at, ledger_seq)
SELECT org_id, version, published_at, 0 FROM bundles
WHERE (org_id, seq) IN (SELECT org_id, max(seq) FROM bundles GROUP BY org_id);
