-- 0032_class_teach.sql — teacher reach over class work, per-class idle and
-- lifetime policies, the class dashboard's figures.
--
-- A teacher (owner, co-teacher) or a TA of a class may act on the work a
-- student runs in that class's context, as far as the class's reach flags
-- allow: open its apps through the proxy, stop it, extend its session.
-- Nobody gains anything over work outside the class's context, over work of
-- members who are not students (a suspended student's still counts), or once
-- the class is archived.

-- A teacher's "extend": until then the instance is neither warned nor
-- stopped for idleness, and its maximum lifetime is pushed to it.
ALTER TABLE instances ADD COLUMN extended_until timestamptz;

-- Is uid a student of class cid (active or suspended: a teacher may still
-- stop a suspended student's work)?
CREATE FUNCTION gc_class_student(uid bigint, cid bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM class_members m
                   WHERE m.class_id = cid AND m.user_id = uid AND m.role = 'student')
$$;

-- May uid do what ('open' | 'stop' | 'extend') to instance iid as staff of
-- the class the instance runs in?  (Owners and admins have their own
-- rules; this is only the class's reach.)
CREATE FUNCTION gc_class_reach(uid bigint, iid bigint, what text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT COALESCE((
        SELECT CASE gc_class_role(uid, c.id)
                 WHEN 'owner'   THEN what <> 'open' OR c.teachers_open_apps
                 WHEN 'teacher' THEN what <> 'open' OR c.teachers_open_apps
                 WHEN 'ta'      THEN CASE WHEN what = 'open' THEN c.tas_open_apps
                                          ELSE c.tas_stop_work END
                 ELSE false END
        FROM instances i JOIN classes c ON c.id = i.class_id
        WHERE i.id = iid AND i.user_id <> uid AND c.state = 'active'
          AND gc_class_student(i.user_id, c.id)), false)
$$;

-- The idle and lifetime policy an instance runs under: its class's when
-- the instance is class work and the class sets one, else its owner's role's.
CREATE FUNCTION gc_instance_policy(iid bigint,
                                   OUT idle_seconds integer, OUT warn_seconds integer,
                                   OUT max_lifetime_seconds integer)
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(c.idle_timeout_s, ip.idle_seconds), COALESCE(ip.warn_seconds, 900),
           COALESCE(c.max_lifetime_s, ip.max_lifetime_seconds)
    FROM instances i JOIN users u ON u.id = i.user_id
    LEFT JOIN idle_policies ip ON ip.role = u.role
    LEFT JOIN classes c ON c.id = i.class_id
    WHERE i.id = iid
$$;

-- GPU-hours of class cid's work allocated since `since` (allocations
-- overlapping it, GPU-equivalents: a slot of a shared GPU counts 1/slots),
-- per user.
CREATE FUNCTION gc_class_gpu_hours(cid bigint, since timestamptz)
RETURNS TABLE (user_id bigint, gpu_hours double precision)
LANGUAGE sql STABLE AS $$
    SELECT r.user_id,
           sum(extract(epoch FROM COALESCE(a.released_at, now()) - greatest(a.allocated_at, since))
               / greatest(COALESCE(p.slots_per_gpu, 1), 1)) / 3600.0
    FROM alloc_requests r JOIN allocations a ON a.request_id = r.id
    LEFT JOIN pools p ON p.id = r.pool_id
    WHERE r.class_id = cid AND a.slice_id IS NOT NULL
      AND COALESCE(a.released_at, now()) > since
    GROUP BY r.user_id
$$;

-- The next occurrences (at most n) of class cid's lab sessions that have
-- not ended yet, soonest first.
CREATE FUNCTION gc_class_next_sessions(cid bigint, n integer)
RETURNS TABLE (session_id bigint, title text, starts_at timestamptz, ends_at timestamptz,
               slices integer, active_now boolean)
LANGUAGE sql STABLE AS $$
    SELECT s.id, s.title, o.st, o.st + (s.ends_at - s.starts_at), s.slices,
           now() >= o.st
    FROM class_sessions s
    CROSS JOIN LATERAL generate_series(
        greatest(0, floor(extract(epoch FROM now() - s.starts_at) / 604800))::int,
        greatest(0, floor(extract(epoch FROM now() - s.starts_at) / 604800))::int + n) k
    CROSS JOIN LATERAL (SELECT s.starts_at + k * interval '7 days' AS st) o
    WHERE s.class_id = cid AND s.cancelled_at IS NULL
      AND o.st + (s.ends_at - s.starts_at) > now()
      AND (k = 0 OR (s.repeat_until IS NOT NULL AND o.st::date <= s.repeat_until))
    ORDER BY o.st, s.id
    LIMIT n
$$;

-- One CSV field: quoted, quotes doubled; a value a spreadsheet would take
-- for a formula (= + - @ tab CR first) gets a leading apostrophe.
CREATE FUNCTION gc_csv(v text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT '"' || replace(CASE WHEN COALESCE(v, '') ~ '^[=+@\t\r-]' THEN '''' || v
                               ELSE COALESCE(v, '') END, '"', '""') || '"'
$$;

-- A timestamp as the API writes them ("2025-01-31T12:00:00Z"; db.h's DB_TS).
CREATE FUNCTION gc_ts(t timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;
