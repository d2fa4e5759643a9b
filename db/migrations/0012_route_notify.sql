-- 0012_route_notify.sql — tells every replica's proxy at once when what a
-- route resolves to changes: an instance changes state (stopped, deleted,
-- running again) or its published ports change.  The proxy LISTENs on
-- channel gc_routes; the payload is the instance id.  Its route cache and
-- open websockets of that instance are re-checked on the spot (the cache's
-- TTL remains the fallback while the listener is down).  NOTIFY is sent at
-- commit and identical ones are folded per transaction.

CREATE FUNCTION gc_route_notify_instance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('gc_routes', OLD.id::text);
    ELSIF NEW.state IS DISTINCT FROM OLD.state OR NEW.user_id IS DISTINCT FROM OLD.user_id THEN
        PERFORM pg_notify('gc_routes', NEW.id::text);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER instances_route_notify AFTER UPDATE OR DELETE ON instances
    FOR EACH ROW EXECUTE FUNCTION gc_route_notify_instance();

CREATE FUNCTION gc_route_notify_port() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('gc_routes', OLD.instance_id::text);
    ELSE
        PERFORM pg_notify('gc_routes', NEW.instance_id::text);
        IF TG_OP = 'UPDATE' AND NEW.instance_id <> OLD.instance_id THEN
            PERFORM pg_notify('gc_routes', OLD.instance_id::text);
        END IF;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER instance_ports_route_notify AFTER INSERT OR UPDATE OR DELETE ON instance_ports
    FOR EACH ROW EXECUTE FUNCTION gc_route_notify_port();
