-- 0025_job_dashboard.sql — what the jobs dashboard (GET /api/v1/jobs) asks
-- of the jobs table: text search over name, tags, command and reason on a
-- million rows, tags (all of the given), image and pool, the end time, and
-- the keys it sorts by.
--
-- Text search is a substring match (ILIKE '%text%'), which a b-tree cannot
-- serve; pg_trgm's GIN index can (three letters or more).  pg_trgm is a
-- trusted extension (PostgreSQL 13+): the database's owner may create it
-- without being a superuser, and gpucloudd's role owns its database
-- (deploy/lib.sh pg_bootstrap).  The text searched is one immutable
-- expression (array_to_string() is only stable in general, but on text[]
-- its result depends on nothing else), so the index and the query share it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE FUNCTION gc_job_search_text(name text, tags text[], command text[], reason text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS
$$ SELECT name || ' ' || array_to_string(tags, ' ') || ' ' || array_to_string(command, ' ')
          || ' ' || reason $$;

CREATE INDEX jobs_search_trgm_idx ON jobs
    USING gin (gc_job_search_text(name, tags, command, reason) gin_trgm_ops);

-- tags @> '{a,b}': every one of the given
CREATE INDEX jobs_tags_idx ON jobs USING gin (tags);

-- image and pool filters (and the ON DELETE SET NULL of images and pools,
-- which would otherwise read every job)
CREATE INDEX jobs_image_idx ON jobs (image_id, id DESC) WHERE image_id IS NOT NULL;
CREATE INDEX jobs_pool_idx ON jobs (pool_id, id DESC) WHERE pool_id IS NOT NULL;

-- "my failed jobs this week": a user's jobs in a state that ended since
-- a time; and everyone's ended jobs by end time (admins)
CREATE INDEX jobs_user_state_finished_idx ON jobs (user_id, state, finished_at DESC)
    WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_finished_idx ON jobs (finished_at DESC, id DESC) WHERE finished_at IS NOT NULL;

-- The dashboard's cursor carries time keys as microseconds since the epoch
-- (a bigint, so a cursor never fails a cast); ±infinity, which sorts the
-- jobs without that time last, as the bigint's extremes.
CREATE FUNCTION gc_ts_us(t timestamptz) RETURNS bigint LANGUAGE sql STABLE PARALLEL SAFE STRICT AS
$$ SELECT CASE WHEN t = 'infinity' THEN 9223372036854775807
               WHEN t = '-infinity' THEN -9223372036854775807
               ELSE (extract(epoch FROM t) * 1000000)::bigint END $$;

CREATE FUNCTION gc_us_ts(us bigint) RETURNS timestamptz LANGUAGE sql STABLE PARALLEL SAFE STRICT AS
$$ SELECT CASE WHEN us >= 9223372036854775807 THEN 'infinity'::timestamptz
               WHEN us <= -9223372036854775807 THEN '-infinity'::timestamptz
               ELSE 'epoch'::timestamptz + (us / 1000000) * interval '1 second'
                    + (us % 1000000) * interval '1 microsecond' END $$;
