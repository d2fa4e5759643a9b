-- 0021_jobs.sql — training jobs: a command in a catalog image that runs to
-- its end, the second kind of workload on the one state machine
-- (server/work/workload.c).
--
-- A job asks the scheduler like an instance does: its allocation request
-- (alloc_requests, owner_kind 'job', owner_id the job's id) is queued in the
-- statement that records the job, so a 201 means both are committed.  The
-- request holds the job's slices, CPU and memory from grant to end; who owns
-- it is the request's owner_kind/owner_id, not a second column here.
--
-- States: queued → starting (pull, create, start) → running → succeeded |
-- failed | cancelled | lost; stopping while a cancel or the runtime limit
-- stops the container.  Every terminal state has a reason (and a
-- reason_code a program can match); exit_code when the container exited.
-- The job directory (home/<user>/jobs/<id>-<name>/, relative to the data
-- root) keeps the log and hyperparameters.json after the container goes.

CREATE TABLE jobs (
    id               bigserial PRIMARY KEY,
    user_id          bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    tags             text[] NOT NULL DEFAULT '{}' CHECK (cardinality(tags) <= 16),
    image_id         bigint REFERENCES images (id) ON DELETE SET NULL,
    command          text[] NOT NULL CHECK (cardinality(command) BETWEEN 1 AND 256),
    env              jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(env) = 'object'),
    hyperparameters  jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(hyperparameters) = 'object'),
    pool_id          bigint REFERENCES pools (id) ON DELETE SET NULL,
    slices           integer NOT NULL DEFAULT 0 CHECK (slices BETWEEN 0 AND 64),
    cpu_millis       bigint NOT NULL DEFAULT 1000 CHECK (cpu_millis > 0),
    mem_mib          bigint NOT NULL DEFAULT 1024 CHECK (mem_mib > 0),
    shm_mib          bigint NOT NULL DEFAULT 64 CHECK (shm_mib > 0),
    priority         alloc_priority NOT NULL DEFAULT 'normal',
    max_runtime_s    integer NOT NULL DEFAULT 86400 CHECK (max_runtime_s > 0),
    -- retry policy: requeued after preemption or the loss of its node or
    -- container, at most retry_limit times (retries so far)
    retry_limit      integer NOT NULL DEFAULT 0 CHECK (retry_limit BETWEEN 0 AND 10),
    retries          integer NOT NULL DEFAULT 0 CHECK (retries >= 0),
    state            text NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'starting', 'running', 'stopping', 'succeeded',
                                      'failed', 'cancelled', 'lost')),
    -- running: run to the end; cancelled: the owner or an admin cancelled
    desired          text NOT NULL DEFAULT 'running' CHECK (desired IN ('running', 'cancelled')),
    cancelled_by     text,
    reason           text NOT NULL DEFAULT '',
    reason_code      text NOT NULL DEFAULT '',
    exit_code        integer,
    request_id       bigint REFERENCES alloc_requests (id) ON DELETE SET NULL,
    node_id          bigint REFERENCES nodes (id) ON DELETE SET NULL,
    container_id     text,
    container_name   text NOT NULL DEFAULT '',
    directory        text NOT NULL,
    idempotency_key  text CHECK (length(idempotency_key) BETWEEN 1 AND 200),
    idempotency_hash text,
    created_at       timestamptz NOT NULL DEFAULT now(),  -- submitted (queued)
    started_at       timestamptz,
    finished_at      timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- a retried submit finds the job its first try made
    CONSTRAINT jobs_idempotency_key UNIQUE (user_id, idempotency_key)
);
-- the dashboard: a user's jobs newest first, optionally by state
CREATE INDEX jobs_user_idx ON jobs (user_id, id DESC);
CREATE INDEX jobs_user_state_idx ON jobs (user_id, state, id DESC);
CREATE INDEX jobs_state_idx ON jobs (state, id DESC);
-- the driver's pass: live jobs only
CREATE INDEX jobs_live_idx ON jobs (id) WHERE state IN ('queued', 'starting', 'running', 'stopping');
CREATE INDEX jobs_request_idx ON jobs (request_id);
-- the driver's pass: ended jobs their retry policy may requeue
CREATE INDEX jobs_requeue_idx ON jobs (id) WHERE state IN ('failed', 'lost') AND retries < retry_limit;
