-- 0009_drop_artifacts_all_orgs: validation-pack builds are jobs (0007,
-- 0008), so no artifact is listed across orgs any more: the index of 0004,
-- which named the 'export' kind, goes, and with it the package artifact's
-- last feature name. Every artifact write updates one index.
DROP INDEX IF EXISTS artifacts_ref_all_orgs;
