-- 0001_init: every table of the first store/pgstore schema.
--
-- org_id leads every primary key (api_keys excepted: keys are looked up by
-- hash, globally), so one org's rows are one index range. Identifiers that
-- are listed in order are COLLATE "C" (byte order, like Pebble's keys);
-- the migration runner drops that clause on CockroachDB, whose STRING
-- always compares bytes. Times are timestamptz (whole microseconds).
-- Records the store never queries inside are JSON in bytea columns, kept
-- byte for byte (a jsonb column would reorder the canonical intent JSON).

-- One row per org, locked FOR UPDATE by every Update of the org: the
-- per-org serialization that keeps the ledger one gap-free chain.
CREATE TABLE org_locks (
    org_id text COLLATE "C" NOT NULL PRIMARY KEY
);

-- One row per committed write transaction, to settle an ambiguous COMMIT.
CREATE TABLE commit_markers (
    org_id     text COLLATE "C" NOT NULL,
    id         uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (org_id, id)
);
CREATE INDEX commit_markers_age ON commit_markers (org_id, created_at);

CREATE TABLE orgs (
    org_id     text COLLATE "C" NOT NULL PRIMARY KEY,
    name       text NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE api_keys (
    hash       text COLLATE "C" NOT NULL PRIMARY KEY,
    org_id     text COLLATE "C" NOT NULL,
    key_id     text NOT NULL,
    kind       text NOT NULL,
    scopes     text[] NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE bundles (
    org_id       text COLLATE "C" NOT NULL,
    version      text COLLATE "C" NOT NULL,
    seq          bigint NOT NULL CHECK (seq > 0),
    bundle_id    text NOT NULL,
    digest       text NOT NULL,
    mode         text NOT NULL,
    rule_count   bigint NOT NULL,
    published_at timestamptz NOT NULL,
    body         bytea NOT NULL,
    PRIMARY KEY (org_id, version),
    UNIQUE (org_id, seq)
);

CREATE TABLE dossiers (
    org_id        text COLLATE "C" NOT NULL,
    dossier_id    text COLLATE "C" NOT NULL,
    decision_id   text COLLATE "C" NOT NULL,
    evaluation_id text NOT NULL,
    created_at    timestamptz NOT NULL,
    outcome       text NOT NULL,
    mode          text NOT NULL,
    workflow_key  text NOT NULL,
    decision_type text NOT NULL,
    body          bytea NOT NULL, -- the canonical JSON, byte for byte
    PRIMARY KEY (org_id, dossier_id),
    UNIQUE (org_id, decision_id)
);
CREATE INDEX dossiers_created ON dossiers (org_id, created_at, dossier_id);

CREATE TABLE ledger_entries (
    org_id          text COLLATE "C" NOT NULL,
    seq             bigint NOT NULL CHECK (seq > 0),
    kind            text NOT NULL,
    subject_id      text NOT NULL,
    payload_digest  text NOT NULL,
    recorded_at     text NOT NULL, -- the hashed RFC 3339 string, verbatim
    prev_entry_hash text NOT NULL,
    entry_hash      text NOT NULL,
    PRIMARY KEY (org_id, seq)
);

CREATE TABLE ledger_heads (
    org_id     text COLLATE "C" NOT NULL PRIMARY KEY,
    seq        bigint NOT NULL CHECK (seq > 0),
    entry_hash text NOT NULL
);

CREATE TABLE idempotency (
    org_id         text COLLATE "C" NOT NULL,
    scope          text COLLATE "C" NOT NULL,
    idem_key       text COLLATE "C" NOT NULL,
    request_digest text NOT NULL,
    response       bytea NOT NULL,
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (org_id, scope, idem_key)
);

CREATE TABLE grants (
    org_id    text COLLATE "C" NOT NULL,
    grant_id  text COLLATE "C" NOT NULL,
    state     text COLLATE "C" NOT NULL,
    issued_at timestamptz NOT NULL,
    record    bytea NOT NULL, -- claim.Grant as JSON
    PRIMARY KEY (org_id, grant_id)
);
CREATE INDEX grants_state ON grants (org_id, state, issued_at, grant_id);

-- A nonce names one grant for good.
CREATE TABLE nonces (
    org_id   text COLLATE "C" NOT NULL,
    nonce    text COLLATE "C" NOT NULL,
    grant_id text NOT NULL,
    PRIMARY KEY (org_id, nonce)
);

-- The one live claim of a concurrency scope.
CREATE TABLE scope_claims (
    org_id           text COLLATE "C" NOT NULL,
    scope            text COLLATE "C" NOT NULL,
    grant_id         text NOT NULL,
    lease_expires_at timestamptz NOT NULL,
    PRIMARY KEY (org_id, scope)
);

CREATE TABLE registered_keys (
    org_id text COLLATE "C" NOT NULL,
    kind   text COLLATE "C" NOT NULL,
    kid    text COLLATE "C" NOT NULL,
    record bytea NOT NULL, -- registry.Key as JSON
    PRIMARY KEY (org_id, kind, kid)
);
