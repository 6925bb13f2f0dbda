-- 0003_artifacts: the evidence artifacts that follow a decision (package
-- artifact): overrides, dispatches, chain memberships, export jobs.
--
-- A record is (org_id, kind, id); ref is what it belongs to, indexed with
-- created_at for the org's listing (artifacts_ref) and for the listing
-- across orgs that resumes background jobs (artifacts_ref_all_orgs). Text
-- is COLLATE "C" so listings order ids and org ids bytewise, as Pebble
-- does. body is opaque bytes, kept byte for byte.
CREATE TABLE artifacts (
    org_id     text COLLATE "C" NOT NULL,
    kind       text COLLATE "C" NOT NULL,
    id         text COLLATE "C" NOT NULL,
    ref        text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    body       bytea NOT NULL,
    PRIMARY KEY (org_id, kind, id)
);
CREATE INDEX artifacts_ref ON artifacts (org_id, kind, ref, created_at, id);
CREATE INDEX artifacts_ref_all_orgs ON artifacts (kind, ref, created_at, org_id, id);
