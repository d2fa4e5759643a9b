-- 0002_nodes.sql — GPU nodes (Docker engines) and their GPUs.
--
-- A node is an engine endpoint.  Its health (what the last checks saw) and
-- its admin state (whether new work may go there) are separate columns; the
-- API's "state" is down when unhealthy, else the admin state.

CREATE TYPE node_health AS ENUM ('unknown', 'up', 'down');
CREATE TYPE node_admin_state AS ENUM ('active', 'draining', 'cordoned');

CREATE TABLE nodes (
    id              bigserial PRIMARY KEY,
    name            text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    url             text NOT NULL CHECK (url ~ '^(unix:///|tcp://)'),
    tls_ca          text,                 -- PEM (public)
    tls_cert        text,                 -- PEM (public)
    tls_key_sealed  text,                 -- PEM, AES-256-GCM under the master key
    labels          jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
    admin_state     node_admin_state NOT NULL DEFAULT 'active',
    health          node_health NOT NULL DEFAULT 'unknown',
    last_seen_at    timestamptz,          -- last successful check
    last_error      text NOT NULL DEFAULT '',
    down_since      timestamptz,
    ncpu            integer,
    memory_bytes    bigint,
    engine_version  text NOT NULL DEFAULT '',
    api_version     text NOT NULL DEFAULT '',
    runc_version    text NOT NULL DEFAULT '',
    toolkit_version text NOT NULL DEFAULT '',
    runtimes        jsonb NOT NULL DEFAULT '[]',
    os              text NOT NULL DEFAULT '',
    kernel          text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (url !~ '^tcp://' OR (tls_ca IS NOT NULL AND tls_cert IS NOT NULL AND tls_key_sealed IS NOT NULL))
);

CREATE TABLE gpus (
    id          bigserial PRIMARY KEY,
    node_id     bigint NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    idx         integer NOT NULL CHECK (idx >= 0),
    uuid        text NOT NULL,
    model       text NOT NULL,
    memory_mib  bigint NOT NULL CHECK (memory_mib >= 0),
    mig_enabled boolean NOT NULL DEFAULT false,
    simulated   boolean NOT NULL,         -- declared by an admin, not discovered
    devices     text[] NOT NULL DEFAULT '{}',  -- device files handed to containers (declared GPUs)
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- deferred, so one statement can replace a node's declared GPUs
    CONSTRAINT gpus_node_idx_key UNIQUE (node_id, idx) DEFERRABLE INITIALLY DEFERRED,
    CONSTRAINT gpus_uuid_key UNIQUE (uuid) DEFERRABLE INITIALLY DEFERRED,
    CHECK (simulated = (cardinality(devices) > 0))
);
CREATE INDEX gpus_node_idx ON gpus (node_id);
