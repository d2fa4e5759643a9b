-- 0017_limits_settings.sql — what a user may use, as one readable table, and
-- site settings an admin changes at run time.
--
-- * site_settings: one row per setting.  value is the admin's (PUT
--   /api/v1/settings/{name}; NULL: none set), config_value what the
--   configuration of the replica that started last said (written at
--   start-up); the admin's wins.  gc_setting(name) reads the one in force
--   ('' when neither is set).  Today: tensorboard_image.
-- * gc_effective_limits(uid): per pool (and once for CPU-only work, pool
--   NULL, first) the limits that apply to the user and where they come
--   from, with what the user holds now and the largest node that could
--   take the work: the home page's card, the admin's view of a user and
--   the instance form's sliders all read it.

CREATE TABLE site_settings (
    name         text PRIMARY KEY CHECK (name IN ('tensorboard_image')),
    value        text CHECK (length(value) <= 512),
    config_value text,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    updated_by   bigint REFERENCES users (id) ON DELETE SET NULL
);
INSERT INTO site_settings (name) VALUES ('tensorboard_image');

CREATE FUNCTION gc_setting(n text) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT COALESCE((SELECT COALESCE(s.value, s.config_value) FROM site_settings s
                      WHERE s.name = n), '')
$$;

-- source: 'user' (the user's own quota), 'role_pool' (the role's default
-- for this pool), 'role' (the role's global default), 'none' (nothing:
-- default deny).  open: the pool admits the user's role.  The CPU-only row
-- counts CPU-only instances and TensorBoards (as gc_cpu_only_block_reason
-- does); a pool row the allocations held in it (cpu and memory per node).
-- node_cpu_millis / node_mem_mib: the largest healthy, active node (with a
-- GPU of the pool for a pool row); NULL when none is up.
CREATE FUNCTION gc_effective_limits(uid bigint)
RETURNS TABLE (pool text, open boolean, source text, max_slices integer,
               max_cpu_millis bigint, max_mem_mib bigint, gpu_hours_per_week double precision,
               max_runtime_s integer, max_tensorboards integer, slices_in_use bigint,
               cpu_millis_in_use bigint, mem_mib_in_use bigint, gpu_seconds_7d double precision,
               tensorboards_running bigint, node_cpu_millis bigint, node_mem_mib bigint)
LANGUAGE sql STABLE AS $$
    SELECT NULL::text, true,
           q.source, NULL::integer, q.max_cpu_millis, q.max_mem_mib, NULL::double precision, NULL::integer,
           (SELECT d.max_tensorboards FROM quota_defaults d
             WHERE d.role = u.role AND d.pool_id IS NULL),
           0::bigint, i.cpu, i.mem, NULL::double precision, i.tb,
           (SELECT max(n.ncpu)::bigint * 1000 FROM nodes n
             WHERE n.health = 'up' AND n.admin_state = 'active'),
           (SELECT max(n.memory_bytes) / 1048576 FROM nodes n
             WHERE n.health = 'up' AND n.admin_state = 'active')
      FROM users u, gc_quota_for(u.id, NULL) q,
           LATERAL (SELECT COALESCE(sum(x.cpu_millis) FILTER (WHERE x.pool_id IS NULL), 0)::bigint AS cpu,
                           COALESCE(sum(x.mem_mib) FILTER (WHERE x.pool_id IS NULL), 0)::bigint AS mem,
                           count(*) FILTER (WHERE x.kind = 'tensorboard') AS tb
                      FROM instances x
                     WHERE x.user_id = u.id AND x.kind IN ('instance', 'tensorboard')
                       AND x.desired = 'running'
                       AND x.state IN ('queued', 'pulling', 'creating', 'running')) i
     WHERE u.id = uid
    UNION ALL
    SELECT p.name, u.role = 'admin' OR u.role = ANY (p.roles),
           CASE WHEN q.source = 'role' AND EXISTS (SELECT 1 FROM quota_defaults d
                 WHERE d.role = u.role AND d.pool_id = p.id) THEN 'role_pool'
                ELSE q.source END,
           q.max_slices, q.max_cpu_millis, q.max_mem_mib, q.gpu_hours_per_week,
           q.max_runtime_s, NULL::integer,
           COALESCE(a.slices, 0), COALESCE(a.cpu, 0), COALESCE(a.mem, 0),
           (SELECT COALESCE(sum(g.gpu_seconds), 0) FROM gpu_usage g
             WHERE g.user_id = u.id AND g.pool_id = p.id AND g.day > current_date - 7),
           NULL::bigint,
           (SELECT max(n.ncpu)::bigint * 1000 FROM nodes n
             WHERE n.health = 'up' AND n.admin_state = 'active'
               AND EXISTS (SELECT 1 FROM gpus gg WHERE gg.node_id = n.id AND gg.pool_id = p.id)),
           (SELECT max(n.memory_bytes) / 1048576 FROM nodes n
             WHERE n.health = 'up' AND n.admin_state = 'active'
               AND EXISTS (SELECT 1 FROM gpus gg WHERE gg.node_id = n.id AND gg.pool_id = p.id))
      FROM users u CROSS JOIN pools p
           CROSS JOIN LATERAL gc_quota_for(u.id, p.id) q
           LEFT JOIN LATERAL (
               SELECT sum(CASE WHEN r.state = 'allocated' THEN
                              (SELECT count(*) FROM allocations al WHERE al.request_id = r.id
                                 AND al.released_at IS NULL AND al.slice_id IS NOT NULL)
                          END)::bigint AS slices,
                      sum(r.cpu_millis * r.nodes)::bigint AS cpu,
                      sum(r.mem_mib * r.nodes)::bigint AS mem
                 FROM alloc_requests r
                WHERE r.user_id = u.id AND r.pool_id = p.id AND r.state = 'allocated') a ON true
     WHERE u.id = uid
$$;
