-- 0010_proxy.sql — routes (an app port of an instance, served on its own
-- origin <route>.<apps_domain>), the one-time tickets of the handshake
-- from the API origin, and route sessions (the cookie of one app origin).
--
-- A route id is 32 lowercase hex characters (128 bits from two random
-- UUIDs), so it is a DNS label and cannot be guessed.  Routes are made for
-- every app port of an instance's image when the instance is created, and
-- for every port published for it (instance_ports), and go with it.

CREATE FUNCTION gc_route_id() RETURNS text LANGUAGE sql VOLATILE AS
$$ SELECT md5(gen_random_uuid()::text || gen_random_uuid()::text) $$;

CREATE TABLE routes (
    id          text PRIMARY KEY DEFAULT gc_route_id() CHECK (id ~ '^[a-z0-9]{16,63}$'),
    instance_id bigint NOT NULL REFERENCES instances (id) ON DELETE CASCADE,
    port_name   text NOT NULL CHECK (port_name <> '' AND length(port_name) <= 63),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (instance_id, port_name)
);

-- One-time tickets: made by GET/POST /api/v1/routes/{id}/open for a logged-in
-- caller, spent by /__gpucloud/handshake on the route's origin within
-- seconds.  Revoking the API session or token revokes what it opened.
CREATE TABLE route_tickets (
    token_hash char(64) PRIMARY KEY,             -- sha256 hex of the ticket
    route_id   text NOT NULL REFERENCES routes (id) ON DELETE CASCADE,
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_id bigint REFERENCES sessions (id) ON DELETE CASCADE,
    token_id   bigint REFERENCES api_tokens (id) ON DELETE CASCADE,
    path       text NOT NULL DEFAULT '/' CHECK (path ~ '^/' AND length(path) <= 2048),
    expires_at timestamptz NOT NULL
);
CREATE INDEX route_tickets_expires_idx ON route_tickets (expires_at);

CREATE TABLE route_sessions (
    id         bigserial PRIMARY KEY,
    token_hash char(64) NOT NULL UNIQUE,         -- sha256 hex of the cookie value
    route_id   text NOT NULL REFERENCES routes (id) ON DELETE CASCADE,
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_id bigint REFERENCES sessions (id) ON DELETE CASCADE,
    token_id   bigint REFERENCES api_tokens (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX route_sessions_expires_idx ON route_sessions (expires_at);

CREATE FUNCTION gc_routes_for_instance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO routes (instance_id, port_name)
    SELECT NEW.id, p->>'name'
      FROM images im, jsonb_array_elements(im.app_ports) p
     WHERE im.id = NEW.image_id AND jsonb_typeof(p->'name') = 'string'
       AND p->>'name' <> '' AND length(p->>'name') <= 63
    ON CONFLICT (instance_id, port_name) DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER instances_routes AFTER INSERT ON instances
    FOR EACH ROW EXECUTE FUNCTION gc_routes_for_instance();

CREATE FUNCTION gc_routes_for_port() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO routes (instance_id, port_name) VALUES (NEW.instance_id, NEW.name)
    ON CONFLICT (instance_id, port_name) DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER instance_ports_routes AFTER INSERT ON instance_ports
    FOR EACH ROW EXECUTE FUNCTION gc_routes_for_port();
