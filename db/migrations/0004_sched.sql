-- 0004_sched.sql — allocation requests, allocations, quotas and GPU usage.
--
-- The invariant that matters most is a constraint: a slice has at most one
-- live (unreleased) allocation, whatever any replica's code does.

CREATE TYPE alloc_priority AS ENUM ('exam', 'normal', 'scavenger');
CREATE TYPE alloc_state AS ENUM ('queued', 'allocated', 'released', 'cancelled');

CREATE TABLE alloc_requests (
    id                   bigserial PRIMARY KEY,
    user_id              bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    pool_id              bigint NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    owner_kind           text NOT NULL DEFAULT 'api' CHECK (owner_kind IN ('api', 'instance', 'job', 'tensorboard')),
    owner_id             text NOT NULL DEFAULT '',
    priority             alloc_priority NOT NULL DEFAULT 'normal',
    slices               integer NOT NULL CHECK (slices BETWEEN 1 AND 64),
    nodes                integer NOT NULL DEFAULT 1 CHECK (nodes BETWEEN 1 AND 64),
    cpu_millis           bigint NOT NULL DEFAULT 0 CHECK (cpu_millis >= 0),
    mem_mib              bigint NOT NULL DEFAULT 0 CHECK (mem_mib >= 0),
    state                alloc_state NOT NULL DEFAULT 'queued',
    reason_code          text NOT NULL DEFAULT 'new',
    reason               text NOT NULL DEFAULT 'waiting for the scheduler',
    position             integer,
    preempt_requested_at timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    allocated_at         timestamptz,
    released_at          timestamptz,
    release_reason       text
);
CREATE INDEX alloc_requests_live_idx ON alloc_requests (state) WHERE state IN ('queued', 'allocated');
CREATE INDEX alloc_requests_user_idx ON alloc_requests (user_id, id DESC);

CREATE TABLE allocations (
    id           bigserial PRIMARY KEY,
    request_id   bigint NOT NULL REFERENCES alloc_requests (id) ON DELETE CASCADE,
    slice_id     bigint REFERENCES slices (id) ON DELETE SET NULL,
    node_id      bigint REFERENCES nodes (id) ON DELETE SET NULL,
    allocated_at timestamptz NOT NULL DEFAULT now(),
    released_at  timestamptz,
    -- a live allocation keeps its slice: removing one in use fails
    CHECK (released_at IS NOT NULL OR (slice_id IS NOT NULL AND node_id IS NOT NULL))
);
-- never twice
CREATE UNIQUE INDEX allocations_live_slice_idx ON allocations (slice_id) WHERE released_at IS NULL;
CREATE INDEX allocations_request_idx ON allocations (request_id);

CREATE TABLE quotas (
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    pool_id    bigint NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    max_slices integer NOT NULL CHECK (max_slices >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, pool_id)
);

-- allocated GPU-seconds (slice-seconds / slots per GPU), for fair share and accounting
CREATE TABLE gpu_usage (
    user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    pool_id     bigint NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    day         date NOT NULL,
    gpu_seconds double precision NOT NULL DEFAULT 0 CHECK (gpu_seconds >= 0),
    PRIMARY KEY (user_id, pool_id, day)
);

-- Ends a request: a queued one is cancelled; an allocated one gives its
-- slices back and its allocated GPU-seconds are added to gpu_usage.  The
-- one place where that happens, whoever releases (owner, admin, scheduler).
CREATE FUNCTION gc_release_request(rid bigint, why text) RETURNS alloc_state
LANGUAGE plpgsql AS $$
DECLARE
    st    alloc_state;
    uid   bigint;
    pid   bigint;
    slots integer;
    secs  double precision;
BEGIN
    SELECT r.state, r.user_id, r.pool_id, p.slots_per_gpu INTO st, uid, pid, slots
      FROM alloc_requests r JOIN pools p ON p.id = r.pool_id
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
      FROM allocations WHERE request_id = rid AND released_at IS NULL;
    UPDATE allocations SET released_at = now() WHERE request_id = rid AND released_at IS NULL;
    UPDATE alloc_requests SET state = 'released', released_at = now(), release_reason = why
     WHERE id = rid;
    INSERT INTO gpu_usage (user_id, pool_id, day, gpu_seconds)
    VALUES (uid, pid, current_date, secs / slots)
    ON CONFLICT (user_id, pool_id, day) DO UPDATE SET gpu_seconds = gpu_usage.gpu_seconds + EXCLUDED.gpu_seconds;
    RETURN 'released';
END
$$;
