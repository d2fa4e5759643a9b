-- 0016_user_lifecycle.sql — forced password changes, soft deletion of
-- accounts, and the rule that one active admin always remains.
--
-- * users.must_change_password: set when an admin resets a password or a
--   CSV import creates the account (someone else knows that password);
--   cleared when the user changes it.  While set, the API answers only
--   /me, logout and the password change (403 password_change_required).
-- * users.deleted_at / deleted_by: DELETE /users/{id} is a soft delete.
--   The row stays, so the audit log, GPU usage, allocations and instances
--   keep naming who they were; a deleted account is always disabled.
-- * At least one admin that is neither disabled nor deleted remains: a
--   trigger refuses the change that would remove, demote, disable or delete
--   the last one (constraint name users_last_admin).  Concurrent changes of
--   two admins serialise on an advisory lock, and each statement in the
--   trigger reads a fresh snapshot, so they cannot both pass.
-- * Nothing of a deleted account starts again: inserting an allocation
--   request or an instance that wants to run for one fails (constraint
--   name user_deleted).

ALTER TABLE users ADD COLUMN must_change_password boolean NOT NULL DEFAULT false;
ALTER TABLE users ADD COLUMN deleted_at timestamptz;
ALTER TABLE users ADD COLUMN deleted_by bigint REFERENCES users (id) ON DELETE SET NULL;
ALTER TABLE users ADD CONSTRAINT users_deleted_disabled CHECK (deleted_at IS NULL OR disabled);
CREATE INDEX users_deleted_idx ON users (id) WHERE deleted_at IS NOT NULL;

CREATE FUNCTION gc_keep_an_admin() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.role = 'admin' AND NOT OLD.disabled AND OLD.deleted_at IS NULL
       AND (TG_OP = 'DELETE' OR NEW.role <> 'admin' OR NEW.disabled
            OR NEW.deleted_at IS NOT NULL) THEN
        PERFORM pg_advisory_xact_lock(hashtext('gc_keep_an_admin'));
        IF NOT EXISTS (SELECT 1 FROM users
                        WHERE role = 'admin' AND NOT disabled AND deleted_at IS NULL
                          AND id <> OLD.id) THEN
            RAISE EXCEPTION 'user ''%'' is the last active admin', OLD.username
                USING ERRCODE = 'check_violation', CONSTRAINT = 'users_last_admin',
                      HINT = 'make another user an admin first';
        END IF;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER users_keep_an_admin
    BEFORE UPDATE OF role, disabled, deleted_at OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION gc_keep_an_admin();

-- FOR SHARE: a start racing the deletion waits for it and then sees it.
CREATE FUNCTION gc_refuse_deleted_owner() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    gone timestamptz;
BEGIN
    SELECT deleted_at INTO gone FROM users WHERE id = NEW.user_id FOR SHARE;
    IF gone IS NOT NULL THEN
        RAISE EXCEPTION 'the account of user % was deleted', NEW.user_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'user_deleted',
                  HINT = 'a deleted account''s work cannot run again';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER alloc_requests_owner_live BEFORE INSERT ON alloc_requests
    FOR EACH ROW EXECUTE FUNCTION gc_refuse_deleted_owner();
CREATE TRIGGER instances_owner_live BEFORE INSERT ON instances
    FOR EACH ROW EXECUTE FUNCTION gc_refuse_deleted_owner();
CREATE TRIGGER instances_owner_live_start BEFORE UPDATE OF desired ON instances
    FOR EACH ROW WHEN (NEW.desired = 'running' AND OLD.desired IS DISTINCT FROM 'running')
    EXECUTE FUNCTION gc_refuse_deleted_owner();
