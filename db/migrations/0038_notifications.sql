-- 0038_notifications.sql — notifications per user, their e-mail state, and
-- the triggers that make them.
--
-- A notification is a kind and its parameters (names, numbers, times), never
-- a sentence: the web renders it in the reader's language, and the mailer
-- (work/mailer.c) writes the mail in the language of the user's preferences.
-- They are made here, by triggers on the rows whose change they report, so
-- every path that ends a job, warns or stops an idle instance, posts a class
-- notice or grows a usage total notifies without knowing of it:
--   job.succeeded / job.failed   jobs.state reaches its end (a failure only
--                                when no retry follows)
--   instance.idle_warning        idle reclamation warned (idle_warning_at set)
--   instance.stopped             idle reclamation stopped it (idle or lifetime)
--   quota.storage                a home area crossed 90 % of its limit
--   quota.gpu_hours              7-day GPU-hours crossed 90 % of the weekly limit
--   class.notice                 a teacher posted a notice (every active member
--                                but its author)
-- A quota notification comes once per crossing: notification_marks remembers
-- it until the usage falls below 80 % again.

CREATE TABLE notifications (
    id            bigserial PRIMARY KEY,
    user_id       bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind          text NOT NULL CHECK (kind IN ('job.succeeded', 'job.failed',
                                                'instance.idle_warning', 'instance.stopped',
                                                'quota.storage', 'quota.gpu_hours',
                                                'class.notice')),
    params        jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(params) = 'object'),
    link          text NOT NULL DEFAULT '' CHECK (length(link) <= 200),
    created_at    timestamptz NOT NULL DEFAULT now(),
    read_at       timestamptz,
    -- e-mail: none (not wanted, or no address), pending (to send at
    -- mail_next_at), sent, failed (gave up after its retries)
    mail_state    text NOT NULL DEFAULT 'none'
                  CHECK (mail_state IN ('none', 'pending', 'sent', 'failed')),
    mail_attempts integer NOT NULL DEFAULT 0 CHECK (mail_attempts >= 0),
    mail_next_at  timestamptz,
    mail_error    text NOT NULL DEFAULT '',
    mailed_at     timestamptz
);
CREATE INDEX notifications_user_idx ON notifications (user_id, id DESC);
CREATE INDEX notifications_unread_idx ON notifications (user_id) WHERE read_at IS NULL;
CREATE INDEX notifications_mail_idx ON notifications (mail_next_at) WHERE mail_state = 'pending';

-- What a user wants mailed (every kind unless listed in email_off) and the
-- language of the mails.  No row: the defaults.
CREATE TABLE notification_prefs (
    user_id    bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    email_off  text[] NOT NULL DEFAULT '{}',
    language   text NOT NULL DEFAULT 'en' CHECK (language IN ('en', 'zh-CN')),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Crossings already notified ('storage:home:7', 'gpu:3').
CREATE TABLE notification_marks (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    mark    text NOT NULL,
    at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, mark)
);

-- A new notification is mailed when its user has an address, is not
-- disabled and has not turned its kind off.
CREATE FUNCTION gc_notification_mail() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM users u LEFT JOIN notification_prefs p ON p.user_id = u.id
                WHERE u.id = NEW.user_id AND u.email <> '' AND NOT u.disabled
                  AND NOT (NEW.kind = ANY (COALESCE(p.email_off, '{}')))) THEN
        NEW.mail_state := 'pending';
        NEW.mail_next_at := now();
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER notifications_mail BEFORE INSERT ON notifications
    FOR EACH ROW EXECUTE FUNCTION gc_notification_mail();

CREATE FUNCTION gc_notify(uid bigint, k text, p jsonb, l text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO notifications (user_id, kind, params, link) VALUES (uid, k, p, l);
$$;

-- Jobs: the end of a job (a failure that a retry follows is not one).
CREATE FUNCTION gc_notify_job() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'succeeded' OR (NEW.state IN ('failed', 'lost') AND NEW.retries >= NEW.retry_limit) THEN
        PERFORM gc_notify(NEW.user_id,
                          CASE WHEN NEW.state = 'succeeded' THEN 'job.succeeded' ELSE 'job.failed' END,
                          jsonb_build_object('job_id', NEW.id, 'name', NEW.name, 'state', NEW.state,
                                             'exit_code', NEW.exit_code,
                                             'reason', left(NEW.reason, 500)),
                          '/job?id=' || NEW.id);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_notify AFTER UPDATE OF state ON jobs
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION gc_notify_job();

-- Instances: idle reclamation's warning (idle_warning_at set) and its stops
-- (desired running → stopped with the reasons work/reclaim.c writes).
CREATE FUNCTION gc_notify_instance() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    pol record;
BEGIN
    IF OLD.idle_warning_at IS NULL AND NEW.idle_warning_at IS NOT NULL THEN
        SELECT * INTO pol FROM gc_instance_policy(NEW.id);
        PERFORM gc_notify(NEW.user_id, 'instance.idle_warning',
                          jsonb_build_object('instance_id', NEW.id, 'name', NEW.name,
                                             'idle_seconds', pol.idle_seconds,
                                             'stop_at', to_char((NEW.idle_warning_at
                                                 + make_interval(secs => COALESCE(pol.warn_seconds, 0)))
                                                 AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')),
                          '/instance?id=' || NEW.id);
    ELSIF OLD.desired = 'running' AND NEW.desired = 'stopped'
          AND (NEW.reason LIKE 'stopped after being idle%' OR NEW.reason LIKE 'reached the maximum lifetime%') THEN
        PERFORM gc_notify(NEW.user_id, 'instance.stopped',
                          jsonb_build_object('instance_id', NEW.id, 'name', NEW.name,
                                             'why', CASE WHEN NEW.reason LIKE 'stopped after being idle%'
                                                         THEN 'idle' ELSE 'lifetime' END,
                                             'reason', left(NEW.reason, 500)),
                          '/instance?id=' || NEW.id);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER instances_notify AFTER UPDATE OF idle_warning_at, desired ON instances
    FOR EACH ROW EXECUTE FUNCTION gc_notify_instance();

-- Class notices: every active member but the author.
CREATE FUNCTION gc_notify_class_notice() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO notifications (user_id, kind, params, link)
    SELECT m.user_id, 'class.notice',
           jsonb_build_object('class_id', c.id, 'class', c.name, 'notice_id', NEW.id,
                              'author', COALESCE(a.username, ''), 'body', left(NEW.body, 1000)),
           '/class?id=' || c.id
      FROM class_members m JOIN classes c ON c.id = m.class_id
      LEFT JOIN users a ON a.id = NEW.author_id
     WHERE m.class_id = NEW.class_id AND m.state = 'active'
       AND m.user_id IS DISTINCT FROM NEW.author_id;
    RETURN NULL;
END $$;
CREATE TRIGGER class_notices_notify AFTER INSERT ON class_notices
    FOR EACH ROW EXECUTE FUNCTION gc_notify_class_notice();

-- Quotas, once per crossing of 90 % (again after falling below 80 %).
-- Returns true when this call newly crossed.
CREATE FUNCTION gc_notify_crossing(uid bigint, m text, used double precision, lim double precision)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    IF lim IS NULL OR lim <= 0 THEN
        RETURN false;
    END IF;
    IF used >= 0.9 * lim THEN
        INSERT INTO notification_marks (user_id, mark) VALUES (uid, m) ON CONFLICT DO NOTHING;
        GET DIAGNOSTICS n = ROW_COUNT;
        RETURN n > 0;
    END IF;
    IF used < 0.8 * lim THEN
        DELETE FROM notification_marks WHERE user_id = uid AND mark = m;
    END IF;
    RETURN false;
END $$;

-- A home area's usage (quota scans and writes update bytes) against its
-- hard limit (the soft one when it has none).
CREATE FUNCTION gc_notify_storage() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    lim bigint;
BEGIN
    IF NEW.user_id IS NULL OR NEW.area NOT LIKE 'home:%' THEN
        RETURN NULL;
    END IF;
    SELECT COALESCE(e.bytes_hard, e.bytes_soft) INTO lim FROM storage_effective e WHERE e.area = NEW.area;
    IF gc_notify_crossing(NEW.user_id, 'storage:' || NEW.area, NEW.bytes, lim) THEN
        PERFORM gc_notify(NEW.user_id, 'quota.storage',
                          jsonb_build_object('area', NEW.area, 'bytes', NEW.bytes, 'limit_bytes', lim,
                                             'percent', floor(100.0 * NEW.bytes / lim)),
                          '/files');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER storage_areas_notify AFTER UPDATE OF bytes ON storage_areas
    FOR EACH ROW WHEN (OLD.bytes IS DISTINCT FROM NEW.bytes) EXECUTE FUNCTION gc_notify_storage();

-- GPU-hours of the last 7 days in a pool (as gc_effective_limits counts
-- them) against the weekly limit, whenever an allocation's use is added.
CREATE FUNCTION gc_notify_gpu_usage() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    lim  double precision;
    used double precision;
BEGIN
    SELECT q.gpu_hours_per_week INTO lim FROM gc_quota_for(NEW.user_id, NEW.pool_id) q;
    IF lim IS NULL OR lim <= 0 THEN
        RETURN NULL;
    END IF;
    SELECT COALESCE(sum(g.gpu_seconds), 0) / 3600.0 INTO used FROM gpu_usage g
     WHERE g.user_id = NEW.user_id AND g.pool_id = NEW.pool_id AND g.day > current_date - 7;
    IF gc_notify_crossing(NEW.user_id, 'gpu:' || NEW.pool_id, used, lim) THEN
        PERFORM gc_notify(NEW.user_id, 'quota.gpu_hours',
                          jsonb_build_object('pool', (SELECT p.name FROM pools p WHERE p.id = NEW.pool_id),
                                             'used_hours', round(used::numeric, 2),
                                             'limit_hours', lim,
                                             'percent', floor(100.0 * used / lim)),
                          '/cluster');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER gpu_usage_notify AFTER INSERT OR UPDATE ON gpu_usage
    FOR EACH ROW EXECUTE FUNCTION gc_notify_gpu_usage();
