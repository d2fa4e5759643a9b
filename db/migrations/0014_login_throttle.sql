-- 0014_login_throttle.sql — login throttling per account and address, with
-- every attempt reserved before its password is checked.
--
-- The policy is described in server/api_auth.c.  The database holds what all
-- replicas must agree on: per (account, address) pair its failures, backoff
-- and the one attempt being verified (busy_until), and whether the account
-- logged in from there before (succeeded_at); per account the failed-attempt
-- budgets of the current hour.  login_reserve() and login_settle() take the
-- account's row lock first, so concurrent attempts at one account, from any
-- replica, are decided one after another on fresh data.

CREATE TABLE login_addresses (
    user_id        bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    addr           text NOT NULL CHECK (length(addr) <= 64),
    failures       integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
    last_failed_at timestamptz,
    locked_until   timestamptz,
    busy_until     timestamptz,   -- an attempt from here is being verified
    succeeded_at   timestamptz,   -- last successful login from here
    PRIMARY KEY (user_id, addr)
);

-- The per-account backoff (failed_logins, locked_until) let anyone lock the
-- owner out; it is replaced by the pair backoff and the hourly budgets.
ALTER TABLE users
    DROP COLUMN failed_logins,
    DROP COLUMN last_failed_at,
    DROP COLUMN locked_until,
    ADD COLUMN login_window_at timestamptz,   -- start of the budgets' hour
    ADD COLUMN login_main  integer NOT NULL DEFAULT 0 CHECK (login_main >= 0),
    ADD COLUMN login_known integer NOT NULL DEFAULT 0 CHECK (login_known >= 0),
    ADD COLUMN login_new   integer NOT NULL DEFAULT 0 CHECK (login_new >= 0);

-- Reserves one attempt at p_user from p_addr before its password is hashed.
-- budget: 'main', 'known' or 'new' (what to refund when it succeeds), or
-- NULL when refused; wait_s: seconds until an attempt may be accepted.
CREATE FUNCTION login_reserve(p_user bigint, p_addr text, p_account int, p_reserve int,
                              OUT budget text, OUT wait_s int)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    u users%ROWTYPE;
    a login_addresses%ROWTYPE;
    known boolean;
    fresh boolean;
BEGIN
    wait_s := 0;
    SELECT * INTO u FROM users WHERE id = p_user FOR UPDATE;
    IF NOT FOUND THEN
        wait_s := 1;
        RETURN;
    END IF;
    SELECT * INTO a FROM login_addresses WHERE user_id = p_user AND addr = p_addr;
    IF FOUND THEN
        IF a.busy_until > now() THEN          -- one attempt at a time per pair
            wait_s := 1;
            RETURN;
        END IF;
        IF a.locked_until > now() THEN
            wait_s := greatest(1, ceil(extract(epoch FROM a.locked_until - now()))::int);
            RETURN;
        END IF;
    END IF;
    known := COALESCE(a.succeeded_at > now() - interval '30 days', false);
    fresh := a.last_failed_at IS NULL OR a.last_failed_at < now() - interval '1 hour';
    IF u.login_window_at IS NULL OR u.login_window_at <= now() - interval '1 hour' THEN
        u.login_window_at := now();
        u.login_main := 0;
        u.login_known := 0;
        u.login_new := 0;
    END IF;
    IF u.login_main < p_account THEN
        budget := 'main';
        u.login_main := u.login_main + 1;
    ELSIF known AND u.login_known < p_reserve THEN
        budget := 'known';
        u.login_known := u.login_known + 1;
    ELSIF fresh AND u.login_new < p_reserve THEN
        budget := 'new';
        u.login_new := u.login_new + 1;
    ELSE
        wait_s := greatest(1, ceil(extract(epoch FROM
                  u.login_window_at + interval '1 hour' - now()))::int);
        RETURN;
    END IF;
    UPDATE users SET login_window_at = u.login_window_at, login_main = u.login_main,
           login_known = u.login_known, login_new = u.login_new
     WHERE id = p_user;
    -- a crashed replica's reservation lapses after 30 s
    INSERT INTO login_addresses (user_id, addr, busy_until)
         VALUES (p_user, p_addr, now() + interval '30 seconds')
    ON CONFLICT (user_id, addr) DO UPDATE SET busy_until = EXCLUDED.busy_until;
END $$;

-- Ends the attempt login_reserve() granted: p_ok true (right password: the
-- reservation is refunded, the pair's failures forgotten, the address
-- known), false (a failure: the pair backs off after p_free failures,
-- doubling up to p_max_delay seconds) or NULL (not checked: refunded only).
CREATE FUNCTION login_settle(p_user bigint, p_addr text, p_budget text, p_ok boolean,
                             p_free int, p_max_delay int)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    n integer;
BEGIN
    PERFORM 1 FROM users WHERE id = p_user FOR UPDATE;
    IF p_ok IS NOT TRUE THEN
        UPDATE login_addresses SET busy_until = NULL WHERE user_id = p_user AND addr = p_addr;
    END IF;
    IF p_ok IS NULL OR p_ok THEN
        UPDATE users SET login_main = greatest(login_main - (p_budget IS NOT DISTINCT FROM 'main')::int, 0),
               login_known = greatest(login_known - (p_budget IS NOT DISTINCT FROM 'known')::int, 0),
               login_new = greatest(login_new - (p_budget IS NOT DISTINCT FROM 'new')::int, 0)
         WHERE id = p_user;
    END IF;
    IF p_ok THEN
        UPDATE login_addresses SET failures = 0, last_failed_at = NULL, locked_until = NULL,
               busy_until = NULL, succeeded_at = now()
         WHERE user_id = p_user AND addr = p_addr;
        -- addresses that only ever failed, long ago, are forgotten
        DELETE FROM login_addresses WHERE user_id = p_user AND succeeded_at IS NULL
           AND last_failed_at < now() - interval '1 day';
    ELSIF NOT p_ok THEN
        SELECT CASE WHEN last_failed_at IS NULL OR last_failed_at < now() - interval '1 hour'
                    THEN 1 ELSE failures + 1 END INTO n
          FROM login_addresses WHERE user_id = p_user AND addr = p_addr;
        UPDATE login_addresses SET failures = n, last_failed_at = now(),
               locked_until = CASE WHEN n >= p_free THEN now() + make_interval(secs =>
                              least(power(2, least(n - p_free, 20)), p_max_delay)) END
         WHERE user_id = p_user AND addr = p_addr;
    END IF;
END $$;
