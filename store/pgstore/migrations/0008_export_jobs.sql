-- 0008_export_jobs: before 0007 a validation pack's build was queued on its
-- own record, an artifact of kind 'export' whose ref was its status. Every
-- pack still PENDING or RUNNING gets its job: queued, due at the pack's
-- creation (so at once), with the attempts its record counted. A RUNNING
-- pack is built again: its worker was a server of the earlier version,
-- which must be stopped before the first server of this one starts.
INSERT INTO jobs (org_id, kind, id, payload, state, attempts, owner, lease_until, due_at, result, failure, created_at, updated_at)
SELECT org_id, 'export', id, ''::bytea, 'queued',
       coalesce((convert_from(body, 'UTF8')::jsonb ->> 'attempts')::integer, 0),
       '', NULL, created_at, ''::bytea, '', created_at, created_at
FROM artifacts
WHERE kind = 'export' AND ref IN ('PENDING', 'RUNNING')
ON CONFLICT (org_id, kind, id) DO NOTHING;
