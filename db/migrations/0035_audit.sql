-- 0035_audit.sql — the audit log is append-only, knows which class an
-- entry is about, and records the system's own actions.
--
-- * audit_log.class_id: the class an entry is about (a class, its members,
--   sessions, notices, assignments, or work that runs in its context), so a
--   teacher reads the entries of the classes they teach.  Filled on insert
--   by gc_audit_fill() from the entry itself; back-filled below.
-- * Append-only: a trigger refuses UPDATE, DELETE and TRUNCATE, even for
--   the table's owner, with one exception: the ON DELETE SET NULL of
--   actor_id when a user row is really deleted (users are soft-deleted by
--   the API, 0016, but an operator may purge one), which changes nothing
--   but actor_id (the actor's name stays in actor_name).
-- * Privileges: UPDATE, DELETE, TRUNCATE are revoked from PUBLIC, and
--   gc_app_grant(role) gives a site's application role what the server
--   needs everywhere, but only SELECT, INSERT on audit_log (README, "Audit
--   log": the owner runs the migrations, the server runs as the app role).
-- * gc_audit_system(): the entry of an action the system took by itself
--   (idle and lifetime stops, preemptions, runtime releases, reconciler
--   removals): actor_id NULL, actor_name 'system', the reason in details.

ALTER TABLE audit_log ADD COLUMN class_id bigint;
CREATE INDEX audit_log_class_idx ON audit_log (class_id, id DESC) WHERE class_id IS NOT NULL;
CREATE INDEX audit_log_action_idx ON audit_log (action, id DESC);
CREATE INDEX audit_log_target_idx ON audit_log (target, id DESC);

-- Which class is the entry (a) about?  NULL when none.
CREATE FUNCTION gc_audit_class(a audit_log) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    n bigint;
BEGIN
    IF jsonb_typeof(a.details -> 'class_id') = 'number' THEN
        RETURN (a.details ->> 'class_id')::bigint;
    END IF;
    IF a.target ~ '^class:[0-9]{1,18}$' THEN
        RETURN substr(a.target, 7)::bigint;
    END IF;
    IF a.target ~ '^instance:[0-9]{1,18}$' THEN
        SELECT class_id INTO n FROM instances WHERE id = substr(a.target, 10)::bigint;
        RETURN n;
    END IF;
    IF a.target ~ '^job:[0-9]{1,18}$' THEN
        SELECT class_id INTO n FROM jobs WHERE id = substr(a.target, 5)::bigint;
        RETURN n;
    END IF;
    IF a.target ~ '^[0-9]{1,18}$' THEN
        -- older call sites name a bare id; the action says of what
        IF a.action IN ('class.notice_post', 'class.notice_delete', 'class.archive') THEN
            RETURN a.target::bigint;
        ELSIF a.action IN ('class.stop_instance', 'class.extend_instance',
                           'class.open_terminal', 'class.open_app') THEN
            SELECT class_id INTO n FROM instances WHERE id = a.target::bigint;
            RETURN n;
        ELSIF a.action LIKE 'class\_session.%' THEN
            SELECT class_id INTO n FROM class_sessions WHERE id = a.target::bigint;
            RETURN n;
        END IF;
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION gc_audit_fill() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.class_id IS NULL THEN
        NEW.class_id := gc_audit_class(NEW);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER audit_log_fill BEFORE INSERT ON audit_log
    FOR EACH ROW EXECUTE FUNCTION gc_audit_fill();

UPDATE audit_log a SET class_id = gc_audit_class(a) WHERE class_id IS NULL;

CREATE FUNCTION gc_audit_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF OLD.actor_id IS NOT NULL AND NEW.actor_id IS NULL
           AND NOT EXISTS (SELECT 1 FROM users WHERE id = OLD.actor_id)
           AND (NEW.id, NEW.at, NEW.actor_name, NEW.action, NEW.target, NEW.ip,
                NEW.request_id, NEW.details, NEW.class_id)
               IS NOT DISTINCT FROM
               (OLD.id, OLD.at, OLD.actor_name, OLD.action, OLD.target, OLD.ip,
                OLD.request_id, OLD.details, OLD.class_id) THEN
            RETURN NEW; -- the foreign key's ON DELETE SET NULL of a purged user
        END IF;
    END IF;
    RAISE EXCEPTION 'the audit log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION gc_audit_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION gc_audit_append_only();

REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM PUBLIC;

-- What the server needs, given to the site's application role (run by the
-- owner after the migrations; README "Audit log"): everything on the
-- tables and sequences of the schema, but on audit_log only SELECT and
-- INSERT.  Returns the role's privileges on audit_log ('ar': append, read).
CREATE FUNCTION gc_app_grant(app name) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    acl text;
BEGIN
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO %I',
                   current_schema(), app);
    EXECUTE format('GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %I TO %I',
                   current_schema(), app);
    EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON audit_log FROM %I',
                   app);
    EXECUTE format('GRANT SELECT, INSERT ON audit_log TO %I', app);
    SELECT string_agg(p, '') INTO acl
      FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE'],
                  ARRAY['r', 'a', 'w', 'd', 'D']) AS x(priv, p)
     WHERE has_table_privilege(app, 'audit_log', priv);
    RETURN COALESCE(acl, '');
END $$;

-- An action the system took by itself.
CREATE FUNCTION gc_audit_system(act text, tgt text, det jsonb) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO audit_log (actor_id, actor_name, action, target, details)
    VALUES (NULL, 'system', act, COALESCE(tgt, ''), COALESCE(det, '{}'::jsonb))
$$;

-- gc_release_request (0030) that records the release as the system's
-- action when it released or cancelled something: the scheduler's
-- preemptions, maximum runtimes and sessions, ended leases.
CREATE FUNCTION gc_release_audited(rid bigint, why text, act text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    res text;
    kind text;
    oid text;
    cid bigint;
    uname text;
BEGIN
    res := gc_release_request(rid, why);
    IF res IN ('released', 'cancelled') THEN
        SELECT r.owner_kind, r.owner_id, r.class_id, u.username INTO kind, oid, cid, uname
          FROM alloc_requests r JOIN users u ON u.id = r.user_id WHERE r.id = rid;
        INSERT INTO audit_log (actor_id, actor_name, action, target, details, class_id)
        VALUES (NULL, 'system', act,
                CASE WHEN kind IN ('instance', 'job', 'tensorboard') AND oid <> ''
                     THEN kind || ':' || oid ELSE 'allocation:' || rid END,
                jsonb_build_object('reason', why, 'allocation_id', rid, 'owner', uname),
                cid);
    END IF;
    RETURN res;
END $$;
