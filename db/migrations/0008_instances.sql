-- 0008_instances.sql — interactive instances (containers on GPU nodes), the
-- ports their apps publish, idle policies, and this database's cluster
-- identity (the label value that tells our containers from other clusters'
-- on shared engines).
--
-- A deleted instance keeps its row (state 'deleted') for accounting; its
-- ports go with the container.

CREATE TABLE cluster_identity (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    cluster_id text NOT NULL
);
INSERT INTO cluster_identity (cluster_id)
VALUES (substr(replace(gen_random_uuid()::text, '-', ''), 1, 16));

CREATE TABLE instances (
    id               bigserial PRIMARY KEY,
    user_id          bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    kind             text NOT NULL DEFAULT 'instance' CHECK (kind IN ('instance', 'tensorboard')),
    image_id         bigint REFERENCES images (id) ON DELETE SET NULL,  -- NULL: the image was removed
    cmd              jsonb CHECK (cmd IS NULL OR jsonb_typeof(cmd) = 'array'),
    env              jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(env) = 'object'),
    pool_id          bigint REFERENCES pools (id) ON DELETE SET NULL,
    slices           integer NOT NULL DEFAULT 0 CHECK (slices BETWEEN 0 AND 64),
    cpu_millis       bigint NOT NULL DEFAULT 1000 CHECK (cpu_millis > 0),
    mem_mib          bigint NOT NULL DEFAULT 1024 CHECK (mem_mib > 0),
    shm_mib          bigint NOT NULL DEFAULT 64 CHECK (shm_mib > 0),
    priority         alloc_priority NOT NULL DEFAULT 'normal',
    state            text NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'pulling', 'creating', 'running', 'stopping',
                                      'stopped', 'failed', 'lost', 'deleted')),
    reason           text NOT NULL DEFAULT '',
    exit_code        integer,
    request_id       bigint REFERENCES alloc_requests (id) ON DELETE SET NULL,
    node_id          bigint REFERENCES nodes (id) ON DELETE SET NULL,
    container_id     text,
    container_name   text NOT NULL DEFAULT '',
    -- set by start/stop/delete: what the driver should reach (a user's
    -- intent survives a crash of gpucloudd between the API call and the
    -- engine call)
    desired          text NOT NULL DEFAULT 'running' CHECK (desired IN ('running', 'stopped', 'deleted')),
    app_token        text NOT NULL DEFAULT replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''),
    last_activity_at timestamptz NOT NULL DEFAULT now(),
    idle_warning_at  timestamptz,
    idle_message     text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    stopped_at       timestamptz,
    restarted_at     timestamptz,     -- a restart in place: its brief exit is not an end
    deleted_at       timestamptz,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
-- a name is unique among a user's live instances
CREATE UNIQUE INDEX instances_user_name_idx ON instances (user_id, name) WHERE state <> 'deleted';
CREATE INDEX instances_live_idx ON instances (state) WHERE state <> 'deleted';
CREATE INDEX instances_request_idx ON instances (request_id);

CREATE TABLE instance_ports (
    instance_id bigint NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    name        text NOT NULL,
    port        integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
    host        text NOT NULL,
    host_port   integer NOT NULL CHECK (host_port BETWEEN 1 AND 65535),
    PRIMARY KEY (instance_id, name)
);

-- Idle reclamation per role: warn after idle_seconds without activity
-- (proxy traffic, CPU or GPU use), stop warn_seconds after the warning;
-- stop any instance running longer than max_lifetime_seconds.  NULL = never.
CREATE TABLE idle_policies (
    role                 user_role PRIMARY KEY,
    idle_seconds         integer CHECK (idle_seconds > 0),
    warn_seconds         integer NOT NULL DEFAULT 900 CHECK (warn_seconds >= 0),
    max_lifetime_seconds integer CHECK (max_lifetime_seconds > 0),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
INSERT INTO idle_policies (role, idle_seconds, warn_seconds, max_lifetime_seconds) VALUES
    ('student', 7200, 900, 86400),
    ('teacher', 14400, 900, NULL),
    ('researcher', 28800, 1800, NULL),
    ('admin', NULL, 900, NULL);

-- CPU-only instances (no pool, no allocation request) have no pool quota of
-- their own: they are held to the tightest CPU and memory limits among the
-- user's pool quotas.  The CPU-only instances a user has starting or running
-- (desired running; queued, pulling, creating or running) together with the
-- one asking (cpu, mem; iid: its id when it exists, left out of the sum) may
-- use at most the smallest max_cpu_millis and the smallest max_mem_mib of the
-- user's quota rows; no row with a limit: no limit.  NULL = may start; else
-- the reason.  Callers run it in the statement that queues the instance: the
-- per-user lock (held to the end of that statement's transaction) and the
-- fresh snapshot each statement in here gets make concurrent requests of one
-- user count each other.
CREATE FUNCTION gc_cpu_only_block_reason(uid bigint, iid bigint, cpu bigint, mem bigint)
RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    lim_cpu bigint;
    lim_mem bigint;
    used_cpu bigint;
    used_mem bigint;
BEGIN
    SELECT min(max_cpu_millis), min(max_mem_mib) INTO lim_cpu, lim_mem
        FROM quotas WHERE user_id = uid;
    IF lim_cpu IS NULL AND lim_mem IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('gc_cpu_only'), uid::int);
    SELECT COALESCE(sum(cpu_millis), 0), COALESCE(sum(mem_mib), 0) INTO used_cpu, used_mem
        FROM instances
        WHERE user_id = uid AND pool_id IS NULL AND kind = 'instance'
          AND desired = 'running' AND state IN ('queued', 'pulling', 'creating', 'running')
          AND id IS DISTINCT FROM iid;
    IF lim_cpu IS NOT NULL AND used_cpu + cpu > lim_cpu THEN
        RETURN format('CPU quota: your CPU-only instances may use %s CPU millis at once'
                      ' (the tightest of your pool quotas); %s are in use, this one asks %s',
                      lim_cpu, used_cpu, cpu);
    END IF;
    IF lim_mem IS NOT NULL AND used_mem + mem > lim_mem THEN
        RETURN format('memory quota: your CPU-only instances may use %s MiB at once'
                      ' (the tightest of your pool quotas); %s MiB are in use, this one asks %s',
                      lim_mem, used_mem, mem);
    END IF;
    RETURN NULL;
END $$;
