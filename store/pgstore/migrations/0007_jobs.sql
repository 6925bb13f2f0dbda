-- 0007_jobs: leased, resumable background work (package jobs). A job is
-- (org_id, kind, id); due_at is set while it is queued or running (then it
-- is the lease's end) and NULL once finished, so the due index holds only
-- the work still to do, in every org, in the order DueJobs lists it.
-- Leases are judged by the database's clock_timestamp().
CREATE TABLE jobs (
    org_id      text COLLATE "C" NOT NULL,
    kind        text COLLATE "C" NOT NULL,
    id          text COLLATE "C" NOT NULL,
    payload     bytea NOT NULL,
    state       text NOT NULL,
    attempts    integer NOT NULL CHECK (attempts >= 0),
    owner       text NOT NULL,
    lease_until timestamptz,
    due_at      timestamptz,
    result      bytea NOT NULL,
    failure     text NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (org_id, kind, id)
);
CREATE INDEX jobs_due ON jobs (kind, due_at, org_id, id) WHERE due_at IS NOT NULL;
