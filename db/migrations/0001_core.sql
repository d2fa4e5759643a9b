-- 0001_core.sql — accounts, sessions, API tokens and the audit log.
--
-- Invariants live here as constraints: one account per username, roles from
-- a fixed set, token scopes from a fixed set, a secret is stored only as its
-- SHA-256 digest.

CREATE TYPE user_role AS ENUM ('admin', 'teacher', 'researcher', 'student');

CREATE TABLE users (
    id                  bigserial PRIMARY KEY,
    username            text NOT NULL UNIQUE
                        CHECK (username ~ '^[a-z][a-z0-9._-]{1,31}$'),
    display_name        text NOT NULL DEFAULT '' CHECK (length(display_name) <= 200),
    email               text NOT NULL DEFAULT '' CHECK (length(email) <= 254),
    role                user_role NOT NULL,
    disabled            boolean NOT NULL DEFAULT false,
    password_hash       text NOT NULL CHECK (password_hash LIKE '$scrypt$%'),
    password_changed_at timestamptz NOT NULL DEFAULT now(),
    failed_logins       integer NOT NULL DEFAULT 0 CHECK (failed_logins >= 0),
    last_failed_at      timestamptz,
    locked_until        timestamptz,
    created_by          bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sessions (
    id           bigserial PRIMARY KEY,
    token_hash   char(64) NOT NULL UNIQUE,      -- sha256 hex of the cookie value
    user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token   text NOT NULL,
    ip           text NOT NULL DEFAULT '',
    user_agent   text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,           -- absolute expiry
    revoked_at   timestamptz,
    CHECK (expires_at > created_at)
);
CREATE INDEX sessions_user_idx ON sessions (user_id) WHERE revoked_at IS NULL;

CREATE TABLE api_tokens (
    id           bigserial PRIMARY KEY,
    user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    token_hash   char(64) NOT NULL UNIQUE,       -- sha256 hex of the whole token
    prefix       text NOT NULL,                  -- shown in lists to tell tokens apart
    scopes       text[] NOT NULL
                 CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['read', 'write']),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz,
    CHECK (expires_at > created_at)
);
CREATE UNIQUE INDEX api_tokens_live_name_idx ON api_tokens (user_id, name) WHERE revoked_at IS NULL;

CREATE TABLE audit_log (
    id         bigserial PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    actor_id   bigint REFERENCES users (id) ON DELETE SET NULL,
    actor_name text NOT NULL DEFAULT '',
    action     text NOT NULL,
    target     text NOT NULL DEFAULT '',
    ip         text NOT NULL DEFAULT '',
    request_id text NOT NULL DEFAULT '',
    details    jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_at_idx ON audit_log (at DESC);
CREATE INDEX audit_log_actor_idx ON audit_log (actor_id, at DESC);
