-- 0024_job_metrics.sql — the scalars jobs report and the CPU and memory
-- their containers use, for the job page's charts and the metrics API.
--
-- job_metrics: one point per (job, series name, step).  A point read again
-- (a log re-read after a restart of gpucloudd) overwrites itself: never
-- twice.  Long runs are thinned as they go (job_metrics_compact): a series
-- keeps at most a bound of points; over it, the older half is cut into
-- buckets of steps, each keeping its first, last, lowest and highest point.
--
-- job_metric_sources: how far the collector (server/work/metrics.c) has
-- read a job's output.log and metrics.jsonl (bytes, and lines: a line's
-- number is the step of a point that names none), written in the same
-- transaction as the points read, so a restart resumes exactly there.
--
-- job_usage: CPU (percent of one core) and memory (bytes) of a running
-- job's container, sampled from its engine; gpu_percent stays NULL where
-- the node cannot measure it (declared GPUs): no number is made up.

CREATE TABLE job_metrics (
    job_id bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    name   text NOT NULL CHECK (name ~ '^[A-Za-z0-9_./-]{1,64}$'),
    step   bigint NOT NULL CHECK (step >= 0),
    value  double precision NOT NULL,
    at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, name, step)
);

CREATE TABLE job_metric_sources (
    job_id     bigint PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    attempt    integer NOT NULL DEFAULT 0, -- jobs.retries when read: a retry's log is new
    log_offset bigint NOT NULL DEFAULT 0,
    log_lines  bigint NOT NULL DEFAULT 0,
    file_offset bigint NOT NULL DEFAULT 0,
    file_lines bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE job_usage (
    job_id      bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at          timestamptz NOT NULL DEFAULT now(),
    cpu_percent double precision CHECK (cpu_percent >= 0),
    mem_bytes   bigint CHECK (mem_bytes >= 0),
    gpu_percent double precision CHECK (gpu_percent >= 0),
    PRIMARY KEY (job_id, at)
);

-- Thins one series to at most bound points (see above): the newest
-- bound/2 stay as they are; the older ones fall into bound/8 buckets of
-- equal step ranges, of which each keeps at most four points (its first,
-- last, lowest and highest), so the series' own first, last, lowest and
-- highest points always stay.
CREATE FUNCTION job_metrics_compact(p_job bigint, p_name text, p_bound integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    keep_from bigint;
    lo bigint;
    hi bigint;
BEGIN
    SELECT count(*) INTO n FROM job_metrics WHERE job_id = p_job AND name = p_name;
    IF n <= p_bound OR p_bound < 16 THEN
        RETURN;
    END IF;
    SELECT step INTO keep_from FROM job_metrics WHERE job_id = p_job AND name = p_name
        ORDER BY step DESC OFFSET p_bound / 2 - 1 LIMIT 1;
    SELECT min(step), max(step) INTO lo, hi FROM job_metrics
        WHERE job_id = p_job AND name = p_name AND step < keep_from;
    IF lo IS NULL THEN
        RETURN;
    END IF;
    -- the steps each bucket keeps; the rest of the older part goes (one
    -- hashed anti-join: no plan that scans the series per row)
    DELETE FROM job_metrics
    WHERE job_id = p_job AND name = p_name AND step < keep_from
      AND step NOT IN (
        SELECT unnest(ARRAY[min(step), max(step),
                            (array_agg(step ORDER BY value, step))[1],
                            (array_agg(step ORDER BY value DESC, step))[1]])
        FROM (SELECT step, value,
                     width_bucket(step::numeric, lo::numeric, (hi + 1)::numeric, p_bound / 8) AS b
              FROM job_metrics WHERE job_id = p_job AND name = p_name AND step < keep_from) x
        GROUP BY b);
END $$;

-- Stores a batch the collector read: points ([{"n": name, "s": step,
-- "v": value}], in the order read: of two with the same name and step the
-- later wins), how far it read, then thins the series written and sets
-- jobs.last_metrics (each series' value at its highest step).  One
-- transaction: points and positions are kept together or not at all.
CREATE FUNCTION job_metrics_store(p_job bigint, p_points jsonb, p_attempt integer,
                                  p_log_offset bigint, p_log_lines bigint,
                                  p_file_offset bigint, p_file_lines bigint, p_bound integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    names text[];
    nm text;
    stored integer;
BEGIN
    INSERT INTO job_metric_sources AS s (job_id, attempt, log_offset, log_lines, file_offset,
                                         file_lines, updated_at)
    VALUES (p_job, p_attempt, p_log_offset, p_log_lines, p_file_offset, p_file_lines, now())
    ON CONFLICT (job_id) DO UPDATE SET attempt = EXCLUDED.attempt,
        log_offset = EXCLUDED.log_offset, log_lines = EXCLUDED.log_lines,
        file_offset = EXCLUDED.file_offset, file_lines = EXCLUDED.file_lines,
        updated_at = now();
    WITH p AS (SELECT DISTINCT ON (e.v->>'n', (e.v->>'s')::bigint)
                      e.v->>'n' AS name, (e.v->>'s')::bigint AS step,
                      (e.v->>'v')::double precision AS value
               FROM jsonb_array_elements(p_points) WITH ORDINALITY AS e(v, i)
               ORDER BY e.v->>'n', (e.v->>'s')::bigint, e.i DESC)
    INSERT INTO job_metrics (job_id, name, step, value, at)
    SELECT p_job, p.name, p.step, p.value, now() FROM p
    ON CONFLICT (job_id, name, step) DO UPDATE SET value = EXCLUDED.value, at = EXCLUDED.at;
    GET DIAGNOSTICS stored = ROW_COUNT;
    SELECT array_agg(DISTINCT e->>'n') INTO names FROM jsonb_array_elements(p_points) e;
    IF names IS NULL THEN
        RETURN 0;
    END IF;
    FOREACH nm IN ARRAY names LOOP
        PERFORM job_metrics_compact(p_job, nm, p_bound);
    END LOOP;
    UPDATE jobs SET last_metrics = last_metrics || COALESCE((
        SELECT jsonb_object_agg(l.name, l.value) FROM (
            SELECT DISTINCT ON (name) name, value FROM job_metrics
            WHERE job_id = p_job AND name = ANY (names) ORDER BY name, step DESC) l), '{}')
    WHERE id = p_job;
    RETURN stored;
END $$;
