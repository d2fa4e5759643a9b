-- 0020_request_limits.sql — a request no limit would ever admit is refused
-- at submit, and one that grows past a lowered limit while it waits says so.
--
-- gc_request_limit() is gc_request_refusal() (0015) with a code, a hint and
-- the numbers: 'forbidden' (the pool is closed to the role, or no quota at
-- all) or 'exceeds_quota' (it asks more than the effective limit allows with
-- nothing else in use: slices, cpu or memory, or a GPU-hour budget of 0).
-- Unlike 0015, a user's own quota counts too: over it, the request could
-- only wait for an admin.  gc_request_refusal() keeps its signature (the
-- statements that queue work call it) and now answers from it.

-- No row: it may queue.  One SQL statement, so the planner inlines it into
-- the scheduler's read of the queue (once per queued request and pass).
CREATE FUNCTION gc_request_limit(uid bigint, pid bigint, slices bigint, cpu bigint, mem bigint)
RETURNS TABLE (code text, why text, hint text, what text, most bigint)
LANGUAGE sql STABLE AS $$
    SELECT c.code, c.why, c.hint, c.what, c.most
    FROM users u LEFT JOIN pools p ON p.id = pid
    CROSS JOIN LATERAL gc_quota_for(uid, pid) q
    CROSS JOIN LATERAL (SELECT
        CASE q.source WHEN 'user' THEN 'you' ELSE format('the %s role', u.role) END AS whose,
        CASE WHEN p.id IS NULL THEN 'for CPU-only work'
             ELSE format('in pool ''%s''', p.name) END AS place,
        'ask for at most %s %s, or have an admin raise the quota'::text AS ask) w
    CROSS JOIN LATERAL (
        SELECT v.code, v.why, v.hint, v.what, v.most FROM (VALUES
        (1, p.id IS NOT NULL AND u.role <> 'admin' AND NOT (u.role = ANY (p.roles)), 'forbidden',
         format('pool ''%s'' is not open to the %s role', p.name, u.role),
         'an admin opens the pool to your role, or use another pool', NULL::text, NULL::bigint),
        (2, q.source = 'none', 'forbidden',
         format('no quota: neither you nor the %s role has a quota %s', u.role,
                CASE WHEN p.id IS NULL THEN 'for CPU-only work'
                     ELSE 'in pool ''' || p.name || '''' END),
         'an admin sets a quota for you or a default for your role (PUT /api/v1/quotas/defaults)',
         NULL, NULL),
        (3, p.id IS NOT NULL AND q.max_slices IS NOT NULL AND slices > q.max_slices, 'exceeds_quota',
         format('quota: %s may hold %s %s of pool ''%s'' at once; this asks %s', w.whose,
                q.max_slices, CASE WHEN q.max_slices = 1 THEN 'slice' ELSE 'slices' END, p.name,
                slices),
         CASE WHEN q.max_slices > 0 THEN format(w.ask, q.max_slices,
                CASE WHEN q.max_slices = 1 THEN 'slice' ELSE 'slices' END)
              ELSE 'an admin raises the quota' END, 'slices', q.max_slices::bigint),
        (4, q.max_cpu_millis IS NOT NULL AND cpu > q.max_cpu_millis, 'exceeds_quota',
         format('quota: %s may use %s millicores of cpu at once %s; this asks %s', w.whose,
                q.max_cpu_millis, w.place, cpu),
         CASE WHEN q.max_cpu_millis > 0 THEN format(w.ask, q.max_cpu_millis, 'millicores of cpu')
              ELSE 'an admin raises the quota' END, 'cpu_millis', q.max_cpu_millis),
        (5, q.max_mem_mib IS NOT NULL AND mem > q.max_mem_mib, 'exceeds_quota',
         format('quota: %s may use %s MiB of memory at once %s; this asks %s', w.whose,
                q.max_mem_mib, w.place, mem),
         CASE WHEN q.max_mem_mib > 0 THEN format(w.ask, q.max_mem_mib, 'MiB of memory')
              ELSE 'an admin raises the quota' END, 'mem_mib', q.max_mem_mib),
        (6, p.id IS NOT NULL AND slices > 0 AND q.gpu_hours_per_week = 0, 'exceeds_quota',
         format('quota: %s may use 0 GPU-hours a week in pool ''%s''', w.whose, p.name),
         'an admin raises the quota', 'gpu_hours', 0::bigint)
        ) v (n, hit, code, why, hint, what, most) WHERE v.hit ORDER BY v.n LIMIT 1) c
    WHERE u.id = uid
$$;

CREATE OR REPLACE FUNCTION gc_request_refusal(uid bigint, pid bigint, slices bigint, cpu bigint, mem bigint)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT why FROM gc_request_limit(uid, pid, slices, cpu, mem)
$$;
