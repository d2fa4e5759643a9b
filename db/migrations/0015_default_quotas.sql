-- 0015_default_quotas.sql — default deny for the scheduler, and everything
-- that runs a container asks it.
--
-- * Per-role default quotas (quota_defaults): used for a user without a
--   quota row of their own in a pool, first the role's row for that pool,
--   then the role's global row (pool_id NULL).  A role with neither gets
--   nothing (zero GPUs, zero CPU).  Seeded: admins unlimited; other roles
--   CPU and memory for CPU-only work and TensorBoards, no GPUs — an admin
--   opens pools to roles (PUT /api/v1/quotas/defaults) or sets user quotas.
-- * Pool access by role (pools.roles): all roles unless an admin restricts.
-- * Raw allocations may carry a lease (alloc_requests.lease_s): the
--   scheduler releases them when it ends.
-- * CPU-only instances and TensorBoards ask for an allocation too: a
--   request without a pool and without slices, placed on a node with room
--   for its CPU and memory; its allocation row names the node, no slice.
-- * Saving an instance as an image reserves the image-quota place under a
--   per-user lock (gc_save_image), so concurrent saves cannot both pass.

CREATE TABLE quota_defaults (
    role               user_role NOT NULL,
    pool_id            bigint REFERENCES pools (id) ON DELETE CASCADE, -- NULL: every pool and CPU-only work
    max_slices         integer CHECK (max_slices >= 0),
    max_cpu_millis     bigint CHECK (max_cpu_millis >= 0),
    max_mem_mib        bigint CHECK (max_mem_mib >= 0),
    gpu_hours_per_week double precision CHECK (gpu_hours_per_week >= 0),
    max_runtime_s      integer CHECK (max_runtime_s > 0),
    max_tensorboards   integer CHECK (max_tensorboards >= 0), -- global rows only
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT quota_defaults_role_pool_key UNIQUE NULLS NOT DISTINCT (role, pool_id)
);
INSERT INTO quota_defaults (role, pool_id, max_slices, max_cpu_millis, max_mem_mib, max_tensorboards) VALUES
    ('admin', NULL, NULL, NULL, NULL, NULL),
    ('teacher', NULL, 0, 8000, 32768, 4),
    ('researcher', NULL, 0, 16000, 65536, 4),
    ('student', NULL, 0, 4000, 16384, 2);

ALTER TABLE pools ADD COLUMN roles user_role[] NOT NULL
    DEFAULT '{admin,teacher,researcher,student}';

ALTER TABLE alloc_requests ADD COLUMN lease_s integer CHECK (lease_s > 0);
ALTER TABLE alloc_requests ALTER COLUMN pool_id DROP NOT NULL;
ALTER TABLE alloc_requests DROP CONSTRAINT alloc_requests_slices_check;
ALTER TABLE alloc_requests ADD CONSTRAINT alloc_requests_slices_check
    CHECK (slices BETWEEN 0 AND 64 AND (pool_id IS NULL) = (slices = 0));
CREATE INDEX alloc_requests_lease_idx ON alloc_requests (allocated_at)
    WHERE state = 'allocated' AND lease_s IS NOT NULL;

-- a live allocation keeps its node, and its slice unless it never had one
-- (removing a slice or node in use still fails)
ALTER TABLE allocations ADD COLUMN cpu_only boolean NOT NULL DEFAULT false;
ALTER TABLE allocations DROP CONSTRAINT allocations_check;
ALTER TABLE allocations ADD CONSTRAINT allocations_check
    CHECK (released_at IS NOT NULL OR (node_id IS NOT NULL AND (slice_id IS NOT NULL OR cpu_only)));

-- The quota that applies to user uid in pool pid (NULL: CPU-only work):
-- their own row; for CPU-only work the tightest CPU and memory limits of
-- their own rows (when one has a limit); else the role's row for the pool;
-- else the role's global row; else nothing at all (source 'none', zeros).
-- NULL limits are no limit.
CREATE FUNCTION gc_quota_for(uid bigint, pid bigint)
RETURNS TABLE (source text, max_slices integer, max_cpu_millis bigint, max_mem_mib bigint,
               gpu_hours_per_week double precision, max_runtime_s integer)
LANGUAGE sql STABLE AS $$
    SELECT x.source, x.max_slices, x.max_cpu_millis, x.max_mem_mib, x.gpu_hours_per_week,
           x.max_runtime_s
    FROM (
        SELECT 'user'::text AS source, q.max_slices, q.max_cpu_millis, q.max_mem_mib,
               q.gpu_hours_per_week, q.max_runtime_s, 1 AS rank
          FROM quotas q WHERE pid IS NOT NULL AND q.user_id = uid AND q.pool_id = pid
        UNION ALL
        SELECT 'user', NULL, min(q.max_cpu_millis), min(q.max_mem_mib), NULL, NULL, 1
          FROM quotas q WHERE pid IS NULL AND q.user_id = uid
        HAVING min(q.max_cpu_millis) IS NOT NULL OR min(q.max_mem_mib) IS NOT NULL
        UNION ALL
        SELECT 'role', d.max_slices, d.max_cpu_millis, d.max_mem_mib, d.gpu_hours_per_week,
               d.max_runtime_s, CASE WHEN d.pool_id IS NULL THEN 3 ELSE 2 END
          FROM quota_defaults d JOIN users u ON u.role = d.role
         WHERE u.id = uid AND (d.pool_id IS NULL OR d.pool_id = pid)
        UNION ALL
        SELECT 'none', 0, 0, 0, NULL, NULL, 4
    ) x ORDER BY x.rank LIMIT 1
$$;

-- Why a request of user uid for pool pid (total slices, cpu, mem over all
-- its nodes) can never be granted as things are: the pool is closed to the
-- role, the user has no quota at all, or it asks more than the role's
-- default allows even with nothing else in use.  NULL = it may queue.  A
-- user's own quota row is the admin's word for that user: a request over it
-- waits with reason quota (the admin may raise it) instead.
CREATE FUNCTION gc_request_refusal(uid bigint, pid bigint, slices bigint, cpu bigint, mem bigint)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN p.id IS NOT NULL AND u.role <> 'admin' AND NOT (u.role = ANY (p.roles)) THEN
            format('pool ''%s'' is not open to the %s role', p.name, u.role)
        WHEN q.source = 'none' THEN
            format('no quota: neither you nor the %s role has a quota %s', u.role,
                   CASE WHEN p.id IS NULL THEN 'for CPU-only work' ELSE 'in pool ''' || p.name || '''' END)
        WHEN q.source = 'role' AND q.max_slices IS NOT NULL AND slices > q.max_slices THEN
            format('quota: the %s role may hold %s slices of pool ''%s'' at once; this asks %s',
                   u.role, q.max_slices, p.name, slices)
        WHEN q.source = 'role' AND q.max_cpu_millis IS NOT NULL AND cpu > q.max_cpu_millis THEN
            format('quota: the %s role may use %s millicores of cpu at once here; this asks %s',
                   u.role, q.max_cpu_millis, cpu)
        WHEN q.source = 'role' AND q.max_mem_mib IS NOT NULL AND mem > q.max_mem_mib THEN
            format('quota: the %s role may use %s MiB of memory at once here; this asks %s',
                   u.role, q.max_mem_mib, mem)
        END
    FROM users u LEFT JOIN pools p ON p.id = pid, gc_quota_for(uid, pid) q
    WHERE u.id = uid
$$;

-- CPU-only work (CPU-only instances and TensorBoards, desired running and
-- starting or running) of user uid together with the one asking (cpu, mem;
-- iid: its id when it exists, left out of the sum) may use at most the
-- CPU-only quota of gc_quota_for(uid, NULL).  NULL = may start; else the
-- reason.  The per-user lock and the fresh snapshot each statement in here
-- gets make concurrent requests of one user count each other.
CREATE OR REPLACE FUNCTION gc_cpu_only_block_reason(uid bigint, iid bigint, cpu bigint, mem bigint)
RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    src text;
    lim_cpu bigint;
    lim_mem bigint;
    used_cpu bigint;
    used_mem bigint;
    what text;
BEGIN
    SELECT q.source, q.max_cpu_millis, q.max_mem_mib INTO src, lim_cpu, lim_mem
        FROM gc_quota_for(uid, NULL) q;
    IF lim_cpu IS NULL AND lim_mem IS NULL THEN
        RETURN NULL;
    END IF;
    what := CASE src WHEN 'user' THEN 'the tightest of your pool quotas'
                     WHEN 'role' THEN 'your role''s default quota'
                     ELSE 'no quota is set for you or your role' END;
    PERFORM pg_advisory_xact_lock(hashtext('gc_cpu_only'), uid::int);
    SELECT COALESCE(sum(cpu_millis), 0), COALESCE(sum(mem_mib), 0) INTO used_cpu, used_mem
        FROM instances
        WHERE user_id = uid AND pool_id IS NULL AND kind IN ('instance', 'tensorboard')
          AND desired = 'running' AND state IN ('queued', 'pulling', 'creating', 'running')
          AND id IS DISTINCT FROM iid;
    IF lim_cpu IS NOT NULL AND used_cpu + cpu > lim_cpu THEN
        RETURN format('CPU quota: your CPU-only instances and TensorBoards may use %s CPU millis at once'
                      ' (%s); %s are in use, this one asks %s', lim_cpu, what, used_cpu, cpu);
    END IF;
    IF lim_mem IS NOT NULL AND used_mem + mem > lim_mem THEN
        RETURN format('memory quota: your CPU-only instances and TensorBoards may use %s MiB at once'
                      ' (%s); %s MiB are in use, this one asks %s', lim_mem, what, used_mem, mem);
    END IF;
    RETURN NULL;
END $$;

-- The TensorBoards user uid may have running at once (the role's global
-- default max_tensorboards; NULL = no cap).  NULL = may start one more.
-- Callers run it in the statement that queues the TensorBoard, after
-- gc_cpu_only_block_reason (which holds the per-user lock).
CREATE FUNCTION gc_tensorboard_block_reason(uid bigint) RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    cap integer;
    n integer;
BEGIN
    SELECT d.max_tensorboards INTO cap FROM quota_defaults d JOIN users u ON u.role = d.role
     WHERE u.id = uid AND d.pool_id IS NULL;
    IF cap IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('gc_cpu_only'), uid::int);
    SELECT count(*) INTO n FROM instances
     WHERE user_id = uid AND kind = 'tensorboard' AND desired = 'running'
       AND state IN ('queued', 'pulling', 'creating', 'running');
    IF n >= cap THEN
        RETURN format('TensorBoard quota: you may run %s TensorBoards at once; %s are running',
                      cap, n);
    END IF;
    RETURN NULL;
END $$;

-- gc_release_request, now also for requests without a pool (no slices:
-- nothing to add to gpu_usage).
CREATE OR REPLACE FUNCTION gc_release_request(rid bigint, why text) RETURNS alloc_state
LANGUAGE plpgsql AS $$
DECLARE
    st    alloc_state;
    uid   bigint;
    pid   bigint;
    slots integer;
    secs  double precision;
BEGIN
    SELECT r.state, r.user_id, r.pool_id, p.slots_per_gpu INTO st, uid, pid, slots
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
    END IF;
    RETURN 'released';
END
$$;

-- Save as image: the personal registry, and the new image row when the
-- user has fewer than quota personal images — counted after taking a
-- per-user lock, in a statement of its own (a fresh snapshot), so two
-- concurrent saves against one free place cannot both take it.
CREATE FUNCTION gc_save_image(uid bigint, parent bigint, uname text, iname text, itag text,
                              quota integer, descr text)
RETURNS TABLE (registry_id bigint, image_id bigint, n bigint, reference text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    reg record;
BEGIN
    SELECT r.id, r.server INTO reg FROM registries r WHERE r.personal;
    IF NOT FOUND THEN
        RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::bigint, NULL::text;
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('gc_save_image'), uid::int);
    SELECT count(*) INTO n FROM images WHERE owner_id = uid;
    IF n >= quota THEN
        RETURN QUERY SELECT reg.id, NULL::bigint, n, NULL::text;
        RETURN;
    END IF;
    RETURN QUERY
    INSERT INTO images (reference, registry_id, display_name, framework, cuda_version, cuda_min,
                        description, default_cmd, app_ports, owner_id)
    SELECT reg.server || '/gpucloud-users/' || uname || '/' || iname || ':' || itag,
           reg.id, iname || ':' || itag, COALESCE(par.framework, ''),
           COALESCE(par.cuda_version, ''), COALESCE(par.cuda_min, 0),
           CASE WHEN descr = '' THEN 'saved from an instance' ELSE descr END, par.default_cmd,
           COALESCE(par.app_ports, '[]'), uid
      FROM (SELECT 1) one LEFT JOIN images par ON par.id = parent
    RETURNING reg.id, images.id, n, images.reference;
END $$;
