-- 0034_usage.sql — accounting history (issue 15): allocation intervals,
-- idle periods and daily storage, kept by triggers so that every path that
-- allocates or releases (scheduler, gc_release_request, cascades) records
-- them, and so that deleting a user, pool, class, image, node or request
-- never erases what was used: no foreign key here cascades; the names are
-- snapshots taken when the row was written.
--
-- usage_intervals: one row per allocation (a slice on a node, or a CPU-only
-- allocation on a node), from allocated_at to released_at (NULL while
-- live).  gpus is the GPU-equivalent the row holds (1 / slots_per_gpu for a
-- slice, 0 for CPU-only); cpu_millis and mem_mib are its share of the
-- request's per-node CPU and memory (the request's per-node amounts divided
-- over its allocations on that node, so a node's rows sum to them exactly).
-- gpu_uuid and gpu_declared say which GPU (gpu_samples are keyed by UUID);
-- a declared GPU is never sampled: its utilisation is "not measurable".
CREATE TABLE usage_intervals (
    allocation_id bigint PRIMARY KEY,          -- allocations.id (no FK: history outlives it)
    request_id    bigint NOT NULL,             -- alloc_requests.id
    user_id       bigint REFERENCES users (id) ON DELETE SET NULL,
    username      text NOT NULL,
    class_id      bigint REFERENCES classes (id) ON DELETE SET NULL,
    class_name    text,
    pool_id       bigint REFERENCES pools (id) ON DELETE SET NULL,
    pool_name     text,
    image_id      bigint REFERENCES images (id) ON DELETE SET NULL,
    image_ref     text,
    owner_kind    text NOT NULL,
    owner_id      text NOT NULL,
    node_id       bigint,
    gpu_uuid      text,
    gpu_declared  boolean,                     -- NULL: no GPU (CPU-only)
    slots_per_gpu integer NOT NULL DEFAULT 1 CHECK (slots_per_gpu >= 1),
    gpus          double precision NOT NULL CHECK (gpus >= 0),
    cpu_millis    double precision NOT NULL DEFAULT 0 CHECK (cpu_millis >= 0),
    mem_mib       double precision NOT NULL DEFAULT 0 CHECK (mem_mib >= 0),
    started_at    timestamptz NOT NULL,
    ended_at      timestamptz,
    CHECK (ended_at IS NULL OR ended_at >= started_at)
);
-- [started_at, ended_at) overlaps [from, to): NULL upper bound = still live
CREATE INDEX usage_intervals_span ON usage_intervals USING gist (tstzrange(started_at, ended_at));
CREATE INDEX usage_intervals_user ON usage_intervals (user_id, started_at);
CREATE INDEX usage_intervals_class ON usage_intervals (class_id, started_at) WHERE class_id IS NOT NULL;
CREATE INDEX usage_intervals_request ON usage_intervals (request_id);
CREATE INDEX usage_intervals_live ON usage_intervals (started_at) WHERE ended_at IS NULL;

-- Idle periods of instances, as idle reclamation sees them (reclaim.c):
-- warned idle at warned_at, idle since started_at (its last activity, or
-- the end of a teacher's extension); it ends when activity is seen again
-- (end_reason 'active', at that activity), or when its allocation is
-- released (ended_at = the release; end_reason 'reclaimed' when idle
-- reclamation stopped it, else 'released').
CREATE TABLE usage_idle_periods (
    id            bigserial PRIMARY KEY,
    instance_id   bigint NOT NULL,             -- no FK: history outlives the instance
    instance_name text NOT NULL,
    request_id    bigint,                      -- the allocation request it held then
    user_id       bigint REFERENCES users (id) ON DELETE SET NULL,
    username      text NOT NULL,
    class_id      bigint REFERENCES classes (id) ON DELETE SET NULL,
    class_name    text,
    started_at    timestamptz NOT NULL,
    warned_at     timestamptz NOT NULL,
    ended_at      timestamptz,
    end_reason    text CHECK (end_reason IN ('active', 'reclaimed', 'released')),
    CHECK (ended_at IS NULL OR ended_at >= started_at)
);
CREATE UNIQUE INDEX usage_idle_periods_open ON usage_idle_periods (instance_id) WHERE ended_at IS NULL;
CREATE INDEX usage_idle_periods_span ON usage_idle_periods USING gist (tstzrange(started_at, ended_at));
CREATE INDEX usage_idle_periods_user ON usage_idle_periods (user_id, started_at);
CREATE INDEX usage_idle_periods_class ON usage_idle_periods (class_id, started_at) WHERE class_id IS NOT NULL;
CREATE INDEX usage_idle_periods_request ON usage_idle_periods (request_id) WHERE ended_at IS NULL;

-- Daily storage of each home: the most its scans saw that UTC day (quota.c
-- writes storage_areas; a trigger keeps this).  storage-days = bytes of a
-- day × the part of the day counted.
CREATE TABLE usage_storage_days (
    area     text NOT NULL,                    -- 'home:<user id>'
    day      date NOT NULL,
    user_id  bigint REFERENCES users (id) ON DELETE SET NULL,
    username text NOT NULL,
    bytes    bigint NOT NULL CHECK (bytes >= 0),
    PRIMARY KEY (area, day)
);
CREATE INDEX usage_storage_days_day ON usage_storage_days (day);
CREATE INDEX usage_storage_days_user ON usage_storage_days (user_id, day);

-- The interval row of allocation a (a row of allocations), as of now.
CREATE FUNCTION gc_usage_interval_insert(a allocations) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO usage_intervals (allocation_id, request_id, user_id, username, class_id,
                                 class_name, pool_id, pool_name, image_id, image_ref,
                                 owner_kind, owner_id, node_id, gpu_uuid, gpu_declared,
                                 slots_per_gpu, gpus, cpu_millis, mem_mib, started_at, ended_at)
    SELECT a.id, r.id, r.user_id, COALESCE(u.username, ''), r.class_id, c.name, r.pool_id,
           p.name, im.id, im.reference, r.owner_kind, r.owner_id, a.node_id, g.uuid,
           g.simulated, COALESCE(p.slots_per_gpu, 1),
           CASE WHEN a.slice_id IS NULL AND a.cpu_only THEN 0
                ELSE 1.0 / COALESCE(p.slots_per_gpu, 1) END,
           r.cpu_millis::double precision / greatest(r.slices, 1),
           r.mem_mib::double precision / greatest(r.slices, 1),
           a.allocated_at, a.released_at
    FROM alloc_requests r
    LEFT JOIN users u ON u.id = r.user_id
    LEFT JOIN classes c ON c.id = r.class_id
    LEFT JOIN pools p ON p.id = r.pool_id
    LEFT JOIN slices s ON s.id = a.slice_id
    LEFT JOIN gpus g ON g.id = s.gpu_id
    -- (a CASE: the planner may test a join's conditions in any order)
    LEFT JOIN instances i ON i.id = CASE WHEN r.owner_kind IN ('instance', 'tensorboard')
                                          AND r.owner_id ~ '^[0-9]{1,18}$'
                                         THEN r.owner_id::bigint END
    LEFT JOIN jobs j ON j.id = CASE WHEN r.owner_kind = 'job' AND r.owner_id ~ '^[0-9]{1,18}$'
                                    THEN r.owner_id::bigint END
    LEFT JOIN images im ON im.id = COALESCE(i.image_id, j.image_id)
    WHERE r.id = a.request_id
    ON CONFLICT (allocation_id) DO NOTHING
$$;

CREATE FUNCTION gc_usage_alloc_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM gc_usage_interval_insert(NEW);
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        UPDATE usage_intervals SET ended_at = NEW.released_at
         WHERE allocation_id = NEW.id AND ended_at IS NULL;
        UPDATE usage_idle_periods SET ended_at = greatest(started_at, NEW.released_at),
               end_reason = COALESCE(end_reason, 'released')
         WHERE request_id = NEW.request_id AND ended_at IS NULL;
        RETURN NULL;
    END IF;
    -- DELETE (a cascade from its request or pool): the history stays, ended
    UPDATE usage_intervals SET ended_at = greatest(started_at, COALESCE(OLD.released_at, now()))
     WHERE allocation_id = OLD.id AND ended_at IS NULL;
    UPDATE usage_idle_periods SET ended_at = greatest(started_at, now()),
           end_reason = COALESCE(end_reason, 'released')
     WHERE request_id = OLD.request_id AND ended_at IS NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER allocations_usage_insert AFTER INSERT ON allocations
    FOR EACH ROW EXECUTE FUNCTION gc_usage_alloc_trigger();
CREATE TRIGGER allocations_usage_release AFTER UPDATE OF released_at ON allocations
    FOR EACH ROW WHEN (OLD.released_at IS NULL AND NEW.released_at IS NOT NULL)
    EXECUTE FUNCTION gc_usage_alloc_trigger();
CREATE TRIGGER allocations_usage_delete AFTER DELETE ON allocations
    FOR EACH ROW EXECUTE FUNCTION gc_usage_alloc_trigger();

-- Idle periods from what reclaim.c writes on instances: a warning opens one
-- (idle since the last activity or extension end), activity that clears the
-- warning closes it, and reclamation's stop marks it 'reclaimed' (it closes
-- when the allocation is released).
CREATE FUNCTION gc_usage_idle_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.idle_warning_at IS NULL AND NEW.idle_warning_at IS NOT NULL THEN
        INSERT INTO usage_idle_periods (instance_id, instance_name, request_id, user_id,
                                        username, class_id, class_name, started_at, warned_at)
        SELECT NEW.id, NEW.name, NEW.request_id, NEW.user_id, COALESCE(u.username, ''),
               NEW.class_id, c.name,
               least(greatest(OLD.last_activity_at, COALESCE(OLD.extended_until, '-infinity')),
                     NEW.idle_warning_at),
               NEW.idle_warning_at
        FROM (SELECT 1) one
        LEFT JOIN users u ON u.id = NEW.user_id
        LEFT JOIN classes c ON c.id = NEW.class_id
        ON CONFLICT (instance_id) WHERE ended_at IS NULL DO NOTHING;
    ELSIF OLD.idle_warning_at IS NOT NULL AND NEW.idle_warning_at IS NULL THEN
        UPDATE usage_idle_periods
           SET ended_at = greatest(started_at,
                                   least(greatest(NEW.last_activity_at,
                                                  COALESCE(NEW.extended_until, '-infinity')),
                                         now())),
               end_reason = COALESCE(end_reason, 'active')
         WHERE instance_id = NEW.id AND ended_at IS NULL;
    END IF;
    IF NEW.desired = 'stopped' AND OLD.desired <> 'stopped' AND NEW.idle_warning_at IS NOT NULL
       AND NEW.reason LIKE 'stopped after being idle%' THEN
        UPDATE usage_idle_periods SET end_reason = 'reclaimed'
         WHERE instance_id = NEW.id AND ended_at IS NULL;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER instances_usage_idle AFTER UPDATE OF idle_warning_at, desired ON instances
    FOR EACH ROW EXECUTE FUNCTION gc_usage_idle_trigger();

-- Daily storage samples from the scans of homes.
CREATE FUNCTION gc_usage_storage_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_storage_days (area, day, user_id, username, bytes)
    SELECT NEW.area, (NEW.scanned_at AT TIME ZONE 'UTC')::date, u.id, u.username, NEW.bytes
    FROM users u WHERE u.id = substr(NEW.area, 6)::bigint
    ON CONFLICT (area, day) DO UPDATE
       SET bytes = greatest(usage_storage_days.bytes, EXCLUDED.bytes),
           username = EXCLUDED.username;
    RETURN NULL;
END
$$;

CREATE TRIGGER storage_areas_usage AFTER INSERT OR UPDATE OF bytes, scanned_at ON storage_areas
    FOR EACH ROW WHEN (NEW.area LIKE 'home:%' AND NEW.scanned_at IS NOT NULL)
    EXECUTE FUNCTION gc_usage_storage_trigger();

-- The calendar buckets of period per ('day' | 'week' | 'month', UTC; a week
-- is ISO, from Monday) that [lo, hi) touches, each with the part of
-- [lo, hi) inside it; per 'total': one bucket, starting at f.  Nothing when
-- hi <= lo.  The accounting reports clip every interval with it.
CREATE FUNCTION gc_usage_buckets(per text, f timestamptz, lo timestamptz, hi timestamptz)
RETURNS TABLE (b_start timestamptz, b_lo timestamptz, b_hi timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT f, lo, hi WHERE per = 'total' AND hi > lo
    UNION ALL
    SELECT x AT TIME ZONE 'UTC', greatest(lo, x AT TIME ZONE 'UTC'),
           least(hi, (x + ('1 ' || per)::interval) AT TIME ZONE 'UTC')
    FROM generate_series(date_trunc(per, lo AT TIME ZONE 'UTC'),
                         (hi AT TIME ZONE 'UTC') - interval '1 microsecond',
                         ('1 ' || per)::interval) x
    WHERE per <> 'total' AND hi > lo
$$;

-- usage_days: the day parts of every ended interval (UTC days), worked out
-- once when it ends, so that a report over many days sums rows instead of
-- clipping every interval and reading its GPU's samples again: gpu_seconds,
-- gpu_used_seconds (the day part weighted by the mean utilisation of its
-- GPU's samples in it; NULL: declared GPU, CPU-only, or no sample),
-- gpu_measured_seconds (the part of gpu_seconds that was sampled),
-- cpu_milli_seconds and mem_mib_seconds.  Keys and names as the interval's.
CREATE TABLE usage_days (
    day                  date NOT NULL,
    allocation_id        bigint NOT NULL,
    user_id              bigint REFERENCES users (id) ON DELETE SET NULL,
    username             text NOT NULL,
    class_id             bigint REFERENCES classes (id) ON DELETE SET NULL,
    class_name           text,
    pool_id              bigint REFERENCES pools (id) ON DELETE SET NULL,
    pool_name            text,
    image_id             bigint REFERENCES images (id) ON DELETE SET NULL,
    image_ref            text,
    gpu_seconds          double precision NOT NULL,
    gpu_used_seconds     double precision,
    gpu_measured_seconds double precision NOT NULL,
    cpu_milli_seconds    double precision NOT NULL,
    mem_mib_seconds      double precision NOT NULL,
    PRIMARY KEY (allocation_id, day)
);
CREATE INDEX usage_days_day ON usage_days (day);
CREATE INDEX usage_days_user ON usage_days (user_id, day);
CREATE INDEX usage_days_class ON usage_days (class_id, day) WHERE class_id IS NOT NULL;

-- A loop, not one INSERT ... SELECT: PL/pgSQL's cached generic plan of the
-- latter read every sample; this lookup always takes the primary key.
CREATE FUNCTION gc_usage_days_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    d    timestamptz := date_trunc('day', NEW.started_at, 'UTC');
    lo   timestamptz;
    hi   timestamptz;
    secs double precision;
    util double precision;
BEGIN
    WHILE d < NEW.ended_at LOOP
        lo := greatest(d, NEW.started_at);
        hi := least(d + interval '24 hours', NEW.ended_at);
        IF hi > lo THEN
            secs := extract(epoch FROM hi - lo);
            util := NULL;
            IF NEW.gpus > 0 AND NOT NEW.gpu_declared THEN
                SELECT avg(s.util_pct) INTO util FROM gpu_samples s
                 WHERE s.gpu_uuid = NEW.gpu_uuid AND s.at >= lo AND s.at < hi;
            END IF;
            INSERT INTO usage_days (day, allocation_id, user_id, username, class_id, class_name,
                                    pool_id, pool_name, image_id, image_ref, gpu_seconds,
                                    gpu_used_seconds, gpu_measured_seconds, cpu_milli_seconds,
                                    mem_mib_seconds)
            VALUES ((d AT TIME ZONE 'UTC')::date, NEW.allocation_id, NEW.user_id, NEW.username,
                    NEW.class_id, NEW.class_name, NEW.pool_id, NEW.pool_name, NEW.image_id,
                    NEW.image_ref, NEW.gpus * secs, NEW.gpus * secs * util / 100,
                    CASE WHEN util IS NULL THEN 0 ELSE NEW.gpus * secs END,
                    NEW.cpu_millis * secs, NEW.mem_mib * secs)
            ON CONFLICT DO NOTHING;
        END IF;
        d := d + interval '24 hours';
    END LOOP;
    RETURN NULL;
END
$$;

CREATE TRIGGER usage_intervals_days_insert AFTER INSERT ON usage_intervals
    FOR EACH ROW WHEN (NEW.ended_at IS NOT NULL) EXECUTE FUNCTION gc_usage_days_trigger();
CREATE TRIGGER usage_intervals_days_end AFTER UPDATE OF ended_at ON usage_intervals
    FOR EACH ROW WHEN (OLD.ended_at IS NULL AND NEW.ended_at IS NOT NULL)
    EXECUTE FUNCTION gc_usage_days_trigger();

-- The history so far: every allocation still on record.
SELECT gc_usage_interval_insert(a) FROM allocations a ORDER BY a.id;
INSERT INTO usage_storage_days (area, day, user_id, username, bytes)
SELECT s.area, (s.scanned_at AT TIME ZONE 'UTC')::date, u.id, u.username, s.bytes
FROM storage_areas s JOIN users u ON u.id = s.user_id
WHERE s.area LIKE 'home:%' AND s.scanned_at IS NOT NULL
ON CONFLICT DO NOTHING;
INSERT INTO usage_idle_periods (instance_id, instance_name, request_id, user_id, username,
                                class_id, class_name, started_at, warned_at)
SELECT i.id, i.name, i.request_id, i.user_id, u.username, i.class_id, c.name,
       least(greatest(i.last_activity_at, COALESCE(i.extended_until, '-infinity')),
             i.idle_warning_at),
       i.idle_warning_at
FROM instances i JOIN users u ON u.id = i.user_id LEFT JOIN classes c ON c.id = i.class_id
WHERE i.idle_warning_at IS NOT NULL AND i.state = 'running';


-- Runs report q (api_usage.c's SQL; $1..$7 = grp, per, from, to in epoch
-- seconds, the caller, admin, class) without JIT: compiling a report's plan
-- takes longer than running it (most of a second on a year of history), and
-- EXECUTE plans it for these very values.  Returns its two columns.
CREATE FUNCTION gc_usage_exec(q text, grp text, per text, f text, t text, me bigint, adm boolean,
                              cls bigint, OUT st text, OUT body text)
LANGUAGE plpgsql STABLE SET jit = off AS $$
BEGIN
    EXECUTE q INTO st, body USING grp, per, f, t, me, adm, cls;
END
$$;
