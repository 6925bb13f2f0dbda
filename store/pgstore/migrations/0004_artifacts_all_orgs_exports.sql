-- Only export jobs are listed across orgs (artifact.IndexedAllOrgs): the
-- all-orgs index covers them alone, so the per-decision chain members, the
-- overrides and the dispatches no longer update a second index.
DROP INDEX artifacts_ref_all_orgs;
CREATE INDEX artifacts_ref_all_orgs ON artifacts (ref, created_at, org_id, id) WHERE kind = 'export';
