-- A version of what GET /me shows beside the caller's own row, so a server
-- may keep the rest and skip recomputing it while nothing it reads changed.
--
-- /me reads, per caller: quotas, allocated requests and their live
-- allocations, gpu_usage of the last 7 days and the home's storage_areas
-- row; and, for everyone: pools (names), storage_defaults, site_settings and
-- images (whether TensorBoard is set up).  Every statement that writes one
-- of these moves a counter in the same transaction: the caller's row for
-- the per-user tables (user_id), the site's row (user_id 0) for the others
-- and for a TRUNCATE of any of them.  The caller lookup of /me reads
-- "<user id>:<user counter>:<site counter>:<current_date>" in the snapshot
-- it reads the session with, so a copy kept under that version is exactly
-- what a fresh read would give.
--
-- Statement triggers with transition tables: a scheduling pass that grants
-- thousands of slices moves each user's counter once, in one statement.
-- No foreign key to users: the cascade that deletes a user fires these
-- triggers for the user's rows, and an upsert referencing the row being
-- deleted would fail the delete.  A deleted user's counter row is a few
-- bytes and harmless.
CREATE TABLE me_versions (
    user_id bigint PRIMARY KEY CHECK (user_id >= 0),
    v       bigint NOT NULL DEFAULT 1
);
INSERT INTO me_versions (user_id) VALUES (0);

-- Moves the counters of uids (NULLs skipped), in user order so two
-- statements moving the same users cannot deadlock on each other.
CREATE FUNCTION gc_me_bump(uids bigint[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO me_versions AS m (user_id)
    SELECT DISTINCT u FROM unnest(uids) u WHERE u IS NOT NULL ORDER BY 1
    ON CONFLICT (user_id) DO UPDATE SET v = m.v + 1
$$;

-- The site's counter, when the statement changed a row (an UPDATE that
-- matched nothing changes nothing /me shows).
CREATE FUNCTION gc_me_bump_site() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- (nested: one IF expression is planned whole, and a TRUNCATE or
    -- DELETE trigger has no gc_me_new)
    IF TG_OP = 'TRUNCATE' THEN
        UPDATE me_versions SET v = v + 1 WHERE user_id = 0;
    ELSIF TG_OP = 'DELETE' THEN
        IF EXISTS (SELECT FROM gc_me_old) THEN
            UPDATE me_versions SET v = v + 1 WHERE user_id = 0;
        END IF;
    ELSIF EXISTS (SELECT FROM gc_me_new) THEN
        UPDATE me_versions SET v = v + 1 WHERE user_id = 0;
    END IF;
    RETURN NULL;
END
$$;

-- Tables whose rows name their user in user_id (quotas, gpu_usage,
-- storage_areas: a class area's user_id is NULL and moves nothing).
CREATE FUNCTION gc_me_bump_user_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM gc_me_bump(ARRAY(SELECT user_id FROM gc_me_new));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM gc_me_bump(ARRAY(SELECT user_id FROM gc_me_old));
    ELSE
        PERFORM gc_me_bump(ARRAY(SELECT user_id FROM gc_me_new
                                 UNION SELECT user_id FROM gc_me_old));
    END IF;
    RETURN NULL;
END
$$;

-- Requests count for /me while allocated: a request entering or leaving
-- that state, or changing owner or pool in it, moves its user.  The
-- scheduler's updates of a queued request's reason move nothing.
CREATE FUNCTION gc_me_bump_requests() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM gc_me_bump(ARRAY(SELECT user_id FROM gc_me_new WHERE state = 'allocated'));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM gc_me_bump(ARRAY(SELECT user_id FROM gc_me_old WHERE state = 'allocated'));
    ELSE
        PERFORM gc_me_bump(ARRAY(
            SELECT unnest(ARRAY[o.user_id, n.user_id])
            FROM gc_me_new n JOIN gc_me_old o ON o.id = n.id
            WHERE (o.state = 'allocated' OR n.state = 'allocated')
              AND (o.state IS DISTINCT FROM n.state OR o.user_id IS DISTINCT FROM n.user_id
                   OR o.pool_id IS DISTINCT FROM n.pool_id)));
    END IF;
    RETURN NULL;
END
$$;

-- Allocations name their request: any write moves the request's user
-- (slices in use count the live ones).
CREATE FUNCTION gc_me_bump_allocations() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM gc_me_bump(ARRAY(SELECT r.user_id FROM gc_me_new a
                                 JOIN alloc_requests r ON r.id = a.request_id));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM gc_me_bump(ARRAY(SELECT r.user_id FROM gc_me_old a
                                 JOIN alloc_requests r ON r.id = a.request_id));
    ELSE
        PERFORM gc_me_bump(ARRAY(SELECT r.user_id FROM gc_me_new a
                                 JOIN alloc_requests r ON r.id = a.request_id));
    END IF;
    RETURN NULL;
END
$$;

DO $$
DECLARE
    t text;
    fn text;
BEGIN
    FOR t, fn IN VALUES ('quotas', 'gc_me_bump_user_rows'), ('gpu_usage', 'gc_me_bump_user_rows'),
                        ('storage_areas', 'gc_me_bump_user_rows'),
                        ('alloc_requests', 'gc_me_bump_requests'),
                        ('allocations', 'gc_me_bump_allocations'),
                        ('pools', 'gc_me_bump_site'), ('storage_defaults', 'gc_me_bump_site'),
                        ('site_settings', 'gc_me_bump_site'), ('images', 'gc_me_bump_site')
    LOOP
        EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS gc_me_new'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION %I()', t || '_me_insert', t, fn);
        EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I'
                       ' REFERENCING NEW TABLE AS gc_me_new OLD TABLE AS gc_me_old'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION %I()', t || '_me_update', t, fn);
        EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS gc_me_old'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION %I()', t || '_me_delete', t, fn);
        EXECUTE format('CREATE TRIGGER %I AFTER TRUNCATE ON %I'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION gc_me_bump_site()', t || '_me_truncate', t);
    END LOOP;
END
$$;
