-- 0011_api_key_lifetimes: a bearer credential may expire (onboarding
-- grants) and be revoked; both NULL for the keys written before, which
-- neither expire nor are revoked. The org index lists an org's
-- credentials, for revoking them all.
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS expires_at timestamptz;
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS revoked_at timestamptz;
CREATE INDEX IF NOT EXISTS api_keys_org ON api_keys (org_id);
