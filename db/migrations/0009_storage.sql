-- 0009_storage.sql — storage quotas and usage.

-- Why user uid may not start new instances or jobs now (over a storage
-- hard limit), or NULL when they may.
CREATE FUNCTION gc_storage_block_reason(uid bigint) RETURNS text
LANGUAGE sql STABLE AS $$ SELECT NULL::text $$;
