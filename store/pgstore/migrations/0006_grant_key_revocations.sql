-- 0006_grant_key_revocations: grant-signing keys revoked platform-wide
-- (store.KeyRevocation). Only the kid is kept, never key material; every
-- server on the database refuses a kid listed here, whatever its own key
-- file says. Rows are only ever inserted: a revocation is permanent.
CREATE TABLE grant_key_revocations (
    kid        text COLLATE "C" NOT NULL PRIMARY KEY,
    revoked_at timestamptz NOT NULL
);
