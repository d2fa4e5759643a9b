-- 0030_class_sched.sql — classes in the scheduler (issue 14, part B).
--
-- Work started in a class's context (alloc_requests.class_id, 0028) is held
-- to student ⊂ class ⊂ pool by the scheduler (sched/place.c); this adds
-- what the database says about it: whether a caller may start work in a
-- class at all and whether the request could ever fit the class's and the
-- student's limits (gc_class_limit, the class twin of gc_request_limit), the
-- class GPU-seconds of released work (gc_release_request), class visibility
-- of catalog images (gc_in_any_class), and the occurrences of lab sessions
-- (gc_class_session_next).

-- 1 when uid is an active member (any role, the owner included) of one of
-- the classes cls: images.vis_classes becomes real.
CREATE FUNCTION gc_in_any_class(uid bigint, cls bigint[]) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT cardinality(cls) > 0 AND EXISTS (
        SELECT 1 FROM unnest(cls) AS x(id) JOIN classes c ON c.id = x.id
        WHERE c.state = 'active' AND gc_class_role(uid, c.id) IS NOT NULL)
$$;

-- Why uid may not start work of `slices` slices, cpu millicores and mem MiB
-- (all nodes together) with image img in pool pid in class cid; no row: it
-- may queue.  Codes: not_found (no such class, or uid is not in it: 404),
-- class_archived, no_allocation (409), wrong_pool, image (422),
-- exceeds_class (422: more than the student's limit or the class's
-- allocation allows with nothing else in use; what/most name the figure).
-- Student limits bind students only; staff are held to the allocation.
CREATE FUNCTION gc_class_limit(uid bigint, cid bigint, pid bigint, img bigint, slices bigint,
                               cpu bigint, mem bigint)
RETURNS TABLE (code text, why text, hint text, what text, most bigint)
LANGUAGE sql STABLE AS $$
    SELECT v.code, v.why, v.hint, v.what, v.most
    FROM (SELECT 1) one
    LEFT JOIN classes c ON c.id = cid
    LEFT JOIN pools p ON p.id = c.pool_id
    CROSS JOIN LATERAL (SELECT gc_class_role(uid, cid) AS role) m
    CROSS JOIN LATERAL (SELECT m.role = 'student' AS st,
        'ask for at most %s %s, or ask your teacher'::text AS ask) w
    CROSS JOIN LATERAL (SELECT * FROM (VALUES
        (1, c.id IS NULL OR m.role IS NULL, 'not_found',
         'no such class (or you are not in it)', 'GET /api/v1/classes lists your classes',
         NULL::text, NULL::bigint),
        (2, c.state <> 'active', 'class_archived',
         format('class ''%s'' is archived', c.name), 'start work in a class that is active',
         NULL, NULL),
        (3, p.id IS NULL OR c.alloc_slices = 0, 'no_allocation',
         format('class ''%s'' has no GPU allocation', c.name),
         'an admin grants the class an allocation from a pool', NULL, NULL),
        (4, pid IS DISTINCT FROM p.id, 'wrong_pool',
         format('class ''%s'' runs in pool ''%s''', c.name, p.name),
         format('leave pool out, or name pool ''%s''', p.name), 'pool', NULL),
        (5, cardinality(c.allowed_images) > 0 AND NOT (img = ANY (c.allowed_images)), 'image',
         format('image %s is not one of the images class ''%s'' allows', img, c.name),
         'pick one of the class''s images (GET /api/v1/classes/{id}: allowed_images)',
         'image_id', NULL),
        (6, w.st AND c.student_slices IS NOT NULL AND slices > c.student_slices, 'exceeds_class',
         format('your class limit in ''%s'': %s %s at once; this asks %s', c.name,
                c.student_slices, CASE WHEN c.student_slices = 1 THEN 'slice' ELSE 'slices' END,
                slices),
         format(w.ask, c.student_slices,
                CASE WHEN c.student_slices = 1 THEN 'slice' ELSE 'slices' END),
         'slices', c.student_slices::bigint),
        (7, slices > c.alloc_slices, 'exceeds_class',
         format('class allocation of ''%s'': %s %s; this asks %s', c.name, c.alloc_slices,
                CASE WHEN c.alloc_slices = 1 THEN 'slice' ELSE 'slices' END, slices),
         format(w.ask, c.alloc_slices, CASE WHEN c.alloc_slices = 1 THEN 'slice' ELSE 'slices' END),
         'slices', c.alloc_slices::bigint),
        (8, w.st AND c.student_cpu_millis IS NOT NULL AND cpu > c.student_cpu_millis, 'exceeds_class',
         format('your class limit in ''%s'': %s millicores of cpu at once; this asks %s', c.name,
                c.student_cpu_millis, cpu),
         format(w.ask, c.student_cpu_millis, 'millicores of cpu'), 'cpu_millis', c.student_cpu_millis),
        (9, c.alloc_cpu_millis IS NOT NULL AND cpu > c.alloc_cpu_millis, 'exceeds_class',
         format('class allocation of ''%s'': %s millicores of cpu; this asks %s', c.name,
                c.alloc_cpu_millis, cpu),
         format(w.ask, c.alloc_cpu_millis, 'millicores of cpu'), 'cpu_millis', c.alloc_cpu_millis),
        (10, w.st AND c.student_mem_mib IS NOT NULL AND mem > c.student_mem_mib, 'exceeds_class',
         format('your class limit in ''%s'': %s MiB of memory at once; this asks %s', c.name,
                c.student_mem_mib, mem),
         format(w.ask, c.student_mem_mib, 'MiB of memory'), 'mem_mib', c.student_mem_mib),
        (11, c.alloc_mem_mib IS NOT NULL AND mem > c.alloc_mem_mib, 'exceeds_class',
         format('class allocation of ''%s'': %s MiB of memory; this asks %s', c.name,
                c.alloc_mem_mib, mem),
         format(w.ask, c.alloc_mem_mib, 'MiB of memory'), 'mem_mib', c.alloc_mem_mib),
        (12, slices > 0 AND (c.alloc_gpu_hours_week = 0
                             OR (w.st AND c.student_gpu_hours_week = 0)), 'exceeds_class',
         format('class ''%s'' gives 0 GPU-hours a week', c.name), 'ask your teacher',
         'gpu_hours', 0::bigint)
        ) x (n, hit, code, why, hint, what, most) WHERE x.hit ORDER BY x.n LIMIT 1) v
$$;

-- What the scheduler reads about a queued request in a class's context:
-- the student's limits (students only; -1/0: the class's), and a sentence
-- when it cannot run now whatever else is in use (class_block: 1 a spent
-- GPU-hour budget, 2 the class is closed to the user).
CREATE FUNCTION gc_class_queue(uid bigint, cid bigint)
RETURNS TABLE (student_slices integer, student_cpu bigint, student_mem bigint, block integer,
               why text)
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN m.role = 'student' THEN COALESCE(c.student_slices, -1) ELSE -1 END,
           CASE WHEN m.role = 'student' THEN COALESCE(c.student_cpu_millis, 0) ELSE 0 END,
           CASE WHEN m.role = 'student' THEN COALESCE(c.student_mem_mib, 0) ELSE 0 END,
           CASE WHEN m.role IS NULL OR c.state <> 'active' THEN 2
                WHEN c.alloc_gpu_hours_week IS NOT NULL AND u.class_h >= c.alloc_gpu_hours_week
                  OR (m.role = 'student' AND c.student_gpu_hours_week IS NOT NULL
                      AND u.mine_h >= c.student_gpu_hours_week) THEN 1
                ELSE 0 END,
           CASE WHEN m.role IS NULL THEN format('you are no longer in class ''%s''', c.name)
                WHEN c.state <> 'active' THEN format('class ''%s'' is archived', c.name)
                WHEN c.alloc_gpu_hours_week IS NOT NULL AND u.class_h >= c.alloc_gpu_hours_week
                THEN format('class GPU-hour budget: %s of %s h used in the last 7 days',
                            round(u.class_h::numeric, 1), c.alloc_gpu_hours_week)
                WHEN m.role = 'student' AND c.student_gpu_hours_week IS NOT NULL
                     AND u.mine_h >= c.student_gpu_hours_week
                THEN format('your class GPU-hour budget: %s of %s h used in the last 7 days',
                            round(u.mine_h::numeric, 1), c.student_gpu_hours_week)
           END
    FROM classes c
    CROSS JOIN LATERAL (SELECT gc_class_role(uid, cid) AS role) m
    CROSS JOIN LATERAL (SELECT COALESCE(sum(g.gpu_seconds), 0) / 3600 AS class_h,
                               COALESCE(sum(g.gpu_seconds) FILTER (WHERE g.user_id = uid), 0)
                               / 3600 AS mine_h
                        FROM class_gpu_usage g WHERE g.class_id = cid
                        AND g.day > current_date - 7) u
    WHERE c.id = cid
$$;

-- gc_release_request, now also adding class work's GPU-seconds to
-- class_gpu_usage (the class's and the student's weekly budgets).
CREATE OR REPLACE FUNCTION gc_release_request(rid bigint, why text) RETURNS alloc_state
LANGUAGE plpgsql AS $$
DECLARE
    st    alloc_state;
    uid   bigint;
    pid   bigint;
    cid   bigint;
    slots integer;
    secs  double precision;
BEGIN
    SELECT r.state, r.user_id, r.pool_id, r.class_id, p.slots_per_gpu
      INTO st, uid, pid, cid, slots
      FROM alloc_requests r LEFT JOIN pools p ON p.id = r.pool_id
     WHERE r.id = rid FOR UPDATE OF r;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF st = 'queued' THEN
        UPDATE alloc_requests SET state = 'cancelled', released_at = now(), release_reason = why,
               position = NULL WHERE id = rid;
        RETURN 'cancelled';
    END IF;
    IF st <> 'allocated' THEN
        RETURN st;
    END IF;
    SELECT COALESCE(sum(extract(epoch FROM now() - allocated_at)), 0) INTO secs
      FROM allocations WHERE request_id = rid AND released_at IS NULL AND slice_id IS NOT NULL;
    UPDATE allocations SET released_at = now() WHERE request_id = rid AND released_at IS NULL;
    UPDATE alloc_requests SET state = 'released', released_at = now(), release_reason = why
     WHERE id = rid;
    IF pid IS NOT NULL THEN
        INSERT INTO gpu_usage (user_id, pool_id, day, gpu_seconds)
        VALUES (uid, pid, current_date, secs / slots)
        ON CONFLICT (user_id, pool_id, day) DO UPDATE SET gpu_seconds = gpu_usage.gpu_seconds + EXCLUDED.gpu_seconds;
        IF cid IS NOT NULL AND EXISTS (SELECT 1 FROM classes WHERE id = cid) THEN
            INSERT INTO class_gpu_usage (class_id, user_id, day, gpu_seconds)
            VALUES (cid, uid, current_date, secs / slots)
            ON CONFLICT (class_id, user_id, day) DO UPDATE
               SET gpu_seconds = class_gpu_usage.gpu_seconds + EXCLUDED.gpu_seconds;
        END IF;
    END IF;
    RETURN 'released';
END
$$;

-- The next n occurrences of a lab session that end after `after` (a weekly
-- one every 7 days from starts_at, starting on or before repeat_until).
CREATE FUNCTION gc_class_session_next(sid bigint, after timestamptz, n integer)
RETURNS TABLE (starts_at timestamptz, ends_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT o.st, o.st + (s.ends_at - s.starts_at)
    FROM class_sessions s
    CROSS JOIN LATERAL (SELECT greatest(0, ceil(extract(epoch FROM after - s.ends_at)
                                                / 604800))::int AS k0) k
    CROSS JOIN LATERAL generate_series(k.k0, k.k0 + n) AS g(k)
    CROSS JOIN LATERAL (SELECT s.starts_at + g.k * interval '7 days' AS st) o
    WHERE s.id = sid AND s.cancelled_at IS NULL
      AND o.st + (s.ends_at - s.starts_at) > after
      AND (g.k = 0 OR (s.repeat_until IS NOT NULL AND o.st::date <= s.repeat_until))
    ORDER BY o.st LIMIT n
$$;

-- The most slices other lab sessions of the pool's classes reserve at any
-- moment inside any occurrence of a session from st to en (weekly until ru,
-- up to a year ahead; NULL: once), leaving out session except_sid (the one
-- being edited); with the name of one class reserving then and the moment.
-- No row: nothing overlaps.
CREATE FUNCTION gc_class_session_clash(pid bigint, st timestamptz, en timestamptz, ru date,
                                       except_sid bigint)
RETURNS TABLE (slices bigint, class_name text, at timestamptz)
LANGUAGE sql STABLE AS $$
    WITH mine AS (
        SELECT st + g.k * interval '7 days' AS a, en + g.k * interval '7 days' AS b
        FROM generate_series(0, CASE WHEN ru IS NULL THEN 0 ELSE 53 END) AS g(k)
        WHERE g.k = 0 OR (st + g.k * interval '7 days')::date <= ru),
    occ AS (
        SELECT s.slices, c.name, o.st, o.st + (s.ends_at - s.starts_at) AS en
        FROM class_sessions s JOIN classes c ON c.id = s.class_id
        CROSS JOIN LATERAL (SELECT s.starts_at + g.k * interval '7 days' AS st
                            FROM generate_series(0, CASE WHEN s.repeat_until IS NULL THEN 0
                                                          ELSE 53 END) AS g(k)) o
        WHERE c.pool_id = pid AND c.state = 'active' AND s.cancelled_at IS NULL
          AND s.slices > 0 AND s.id IS DISTINCT FROM except_sid
          AND (o.st = s.starts_at OR o.st::date <= s.repeat_until)),
    pts AS (SELECT DISTINCT greatest(o.st, m.a) AS t
            FROM mine m JOIN occ o ON o.st < m.b AND o.en > m.a)
    SELECT sum(o.slices), min(o.name), p.t
    FROM pts p JOIN occ o ON o.st <= p.t AND o.en > p.t
    GROUP BY p.t ORDER BY sum(o.slices) DESC, p.t LIMIT 1
$$;

-- A timestamp or a date as the API was sent it, or NULL when it is not one
-- (the caller says which field is wrong).
CREATE FUNCTION gc_try_ts(t text) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN t::timestamptz;
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;

CREATE FUNCTION gc_try_date(t text) RETURNS date
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN t::date;
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;

-- Pre-pull: the start of the occurrence whose images were last sent to the
-- pool's nodes (the periodic pull runs once per occurrence).
ALTER TABLE class_sessions ADD COLUMN prepulled_for timestamptz;
