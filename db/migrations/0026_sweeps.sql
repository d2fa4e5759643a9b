-- 0026_sweeps.sql — hyperparameter sweeps, and when a waiting request may
-- start.
--
-- A sweep is one submit that makes one job per hyperparameter set (a grid's
-- cartesian product or a list of sets), all recorded with their allocation
-- requests in one statement (api_sweeps.c): a 201 means every run is
-- committed.  Its runs are ordinary jobs (jobs.sweep_id); the sweep keeps
-- what was asked (spec, the body as sent), the metric that ranks its runs
-- (from jobs.last_metrics) and whether lower or higher is better.
--
-- eta_at/eta_reason on alloc_requests: the scheduler's estimate of when a
-- queued request starts (sched/eta.c, a conservative simulation from the
-- maximum runtimes of the work holding and ahead of it), or NULL and the
-- reason no estimate can be made.

CREATE TABLE sweeps (
    id               bigserial PRIMARY KEY,
    user_id          bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,55}$'),
    tags             text[] NOT NULL DEFAULT '{}' CHECK (cardinality(tags) <= 16),
    metric           text NOT NULL CHECK (metric ~ '^[A-Za-z_][A-Za-z0-9_./-]{0,63}$'),
    goal             text NOT NULL CHECK (goal IN ('min', 'max')),
    spec             jsonb NOT NULL CHECK (jsonb_typeof(spec) = 'object'),
    runs             integer NOT NULL CHECK (runs BETWEEN 1 AND 256),
    cancelled_by     text,
    cancelled_at     timestamptz,
    idempotency_key  text CHECK (length(idempotency_key) BETWEEN 1 AND 200),
    idempotency_hash text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sweeps_idempotency_key UNIQUE (user_id, idempotency_key)
);
CREATE INDEX sweeps_user_idx ON sweeps (user_id, id DESC);

ALTER TABLE jobs ADD COLUMN sweep_id bigint REFERENCES sweeps (id) ON DELETE SET NULL;
CREATE INDEX jobs_sweep_idx ON jobs (sweep_id, id) WHERE sweep_id IS NOT NULL;

ALTER TABLE alloc_requests ADD COLUMN eta_at timestamptz,
    ADD COLUMN eta_reason text NOT NULL DEFAULT '';
