-- 0009_storage.sql — storage areas, quotas and usage, trash, resumable uploads.
--
-- Usage is kept per area ('home:<user id>', 'class:<class id>', 'shared'):
-- bytes and files measured by gpucloudd's scans (allocated blocks, hard links
-- once) plus bytes reserved by uploads in flight.  A reservation is taken by
-- one UPDATE whose WHERE re-checks the limit on the locked row, so two
-- racing uploads can never both pass the hard limit.
--
-- Classes: no other module has classes yet, so a minimal classes table
-- (name, teacher) and its members live here; the class module may extend
-- them.

CREATE TABLE classes (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 100),
    teacher_id  bigint NOT NULL REFERENCES users (id) ON DELETE RESTRICT,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE class_members (
    class_id    bigint NOT NULL REFERENCES classes (id) ON DELETE CASCADE,
    user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    PRIMARY KEY (class_id, user_id)
);
CREATE INDEX class_members_user ON class_members (user_id);

-- Defaults (one row) for areas without an override; NULL = no limit.
CREATE TABLE storage_defaults (
    one              boolean PRIMARY KEY DEFAULT true CHECK (one),
    user_bytes_soft  bigint CHECK (user_bytes_soft >= 0),
    user_bytes_hard  bigint CHECK (user_bytes_hard >= 0),
    user_files_soft  bigint CHECK (user_files_soft >= 0),
    user_files_hard  bigint CHECK (user_files_hard >= 0),
    class_bytes_soft bigint CHECK (class_bytes_soft >= 0),
    class_bytes_hard bigint CHECK (class_bytes_hard >= 0),
    class_files_soft bigint CHECK (class_files_soft >= 0),
    class_files_hard bigint CHECK (class_files_hard >= 0)
);
INSERT INTO storage_defaults (user_bytes_soft, user_bytes_hard, user_files_soft, user_files_hard,
                              class_bytes_soft, class_bytes_hard, class_files_soft,
                              class_files_hard)
VALUES (40::bigint << 30, 50::bigint << 30, 900000, 1000000,
        80::bigint << 30, 100::bigint << 30, 900000, 1000000);

CREATE TABLE storage_areas (
    area        text PRIMARY KEY CHECK (area ~ '^(home:[0-9]+|class:[0-9]+|shared)$'),
    user_id     bigint REFERENCES users (id) ON DELETE CASCADE,
    class_id    bigint REFERENCES classes (id) ON DELETE CASCADE,
    bytes       bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
    files       bigint NOT NULL DEFAULT 0 CHECK (files >= 0),
    reserved    bigint NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    scanned_at  timestamptz,
    -- overrides set by an admin; NULL = the default
    bytes_soft  bigint CHECK (bytes_soft >= 0),
    bytes_hard  bigint CHECK (bytes_hard >= 0),
    files_soft  bigint CHECK (files_soft >= 0),
    files_hard  bigint CHECK (files_hard >= 0)
);

-- Effective limits of every area (overrides, else defaults; shared has none).
CREATE VIEW storage_effective AS
SELECT a.area, a.user_id, a.class_id, a.bytes, a.files, a.reserved, a.scanned_at,
       CASE WHEN a.area LIKE 'home:%' THEN COALESCE(a.bytes_soft, d.user_bytes_soft)
            WHEN a.area LIKE 'class:%' THEN COALESCE(a.bytes_soft, d.class_bytes_soft) END
           AS bytes_soft,
       CASE WHEN a.area LIKE 'home:%' THEN COALESCE(a.bytes_hard, d.user_bytes_hard)
            WHEN a.area LIKE 'class:%' THEN COALESCE(a.bytes_hard, d.class_bytes_hard) END
           AS bytes_hard,
       CASE WHEN a.area LIKE 'home:%' THEN COALESCE(a.files_soft, d.user_files_soft)
            WHEN a.area LIKE 'class:%' THEN COALESCE(a.files_soft, d.class_files_soft) END
           AS files_soft,
       CASE WHEN a.area LIKE 'home:%' THEN COALESCE(a.files_hard, d.user_files_hard)
            WHEN a.area LIKE 'class:%' THEN COALESCE(a.files_hard, d.class_files_hard) END
           AS files_hard
FROM storage_areas a CROSS JOIN storage_defaults d;

CREATE TABLE storage_reservations (
    id          bigserial PRIMARY KEY,
    area        text NOT NULL REFERENCES storage_areas (area) ON DELETE CASCADE,
    bytes       bigint NOT NULL CHECK (bytes >= 0),
    expires_at  timestamptz NOT NULL
);

-- Reserves nbytes (and nfiles) in area, creating its row when missing.
-- Returns the reservation id, or NULL when it would cross the hard limit.
CREATE FUNCTION gc_storage_reserve(p_area text, p_user bigint, p_class bigint, nbytes bigint,
                                   nfiles bigint, ttl interval) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    rid bigint;
BEGIN
    INSERT INTO storage_areas (area, user_id, class_id) VALUES (p_area, p_user, p_class)
    ON CONFLICT (area) DO NOTHING;
    -- the WHERE is re-checked on the newest row version once its lock is
    -- ours, so concurrent reservations see each other
    UPDATE storage_areas a SET reserved = a.reserved + nbytes
    FROM storage_defaults d
    WHERE a.area = p_area
      AND (a.bytes + a.reserved + nbytes <=
           CASE WHEN a.area LIKE 'home:%' THEN COALESCE(a.bytes_hard, d.user_bytes_hard)
                WHEN a.area LIKE 'class:%' THEN COALESCE(a.bytes_hard, d.class_bytes_hard)
           END
           OR CASE WHEN a.area LIKE 'home:%' THEN COALESCE(a.bytes_hard, d.user_bytes_hard)
                   WHEN a.area LIKE 'class:%' THEN COALESCE(a.bytes_hard, d.class_bytes_hard)
              END IS NULL)
      AND (nfiles = 0 OR a.files + nfiles <=
           CASE WHEN a.area LIKE 'home:%' THEN COALESCE(a.files_hard, d.user_files_hard)
                WHEN a.area LIKE 'class:%' THEN COALESCE(a.files_hard, d.class_files_hard)
           END
           OR CASE WHEN a.area LIKE 'home:%' THEN COALESCE(a.files_hard, d.user_files_hard)
                   WHEN a.area LIKE 'class:%' THEN COALESCE(a.files_hard, d.class_files_hard)
              END IS NULL);
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO storage_reservations (area, bytes, expires_at)
    VALUES (p_area, nbytes, now() + ttl) RETURNING id INTO rid;
    RETURN rid;
END $$;

-- Ends a reservation; used_bytes/used_files are what the write added (they
-- count at once, until the next scan measures them).
CREATE FUNCTION gc_storage_release(rid bigint, used_bytes bigint, used_files bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r storage_reservations;
BEGIN
    DELETE FROM storage_reservations WHERE id = rid RETURNING * INTO r;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE storage_areas SET reserved = greatest(reserved - r.bytes, 0),
                             bytes = greatest(bytes + used_bytes, 0),
                             files = greatest(files + used_files, 0)
    WHERE area = r.area;
END $$;

-- Expired reservations (a replica died mid-upload) give their bytes back.
CREATE FUNCTION gc_storage_expire() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH d AS (DELETE FROM storage_reservations WHERE expires_at < now()
               RETURNING area, bytes),
         s AS (SELECT area, sum(bytes) AS b, count(*) AS c FROM d GROUP BY area),
         u AS (UPDATE storage_areas a SET reserved = greatest(a.reserved - s.b, 0)
               FROM s WHERE a.area = s.area RETURNING s.c)
    SELECT COALESCE(sum(c), 0) INTO n FROM u;
    RETURN n;
END $$;

CREATE TABLE trash_items (
    id          bigserial PRIMARY KEY,
    area        text NOT NULL,              -- 'home:<uid>', 'class:<id>', 'shared'
    path        text NOT NULL,              -- where it was, relative to the area
    trash_name  text NOT NULL UNIQUE,       -- its name in the area's trash directory
    is_dir      boolean NOT NULL,
    bytes       bigint NOT NULL DEFAULT 0,
    deleted_by  bigint REFERENCES users (id) ON DELETE SET NULL,
    deleted_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX trash_items_area ON trash_items (area, deleted_at DESC);

CREATE TABLE uploads (
    id             bigserial PRIMARY KEY,
    user_id        bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    area           text NOT NULL,             -- as the client named it ('home', 'class:3')
    usage_area     text NOT NULL,             -- the storage_areas key it counts against
    path           text NOT NULL,
    size           bigint NOT NULL CHECK (size >= 0),
    part_size      bigint NOT NULL CHECK (part_size > 0),
    parts          integer NOT NULL CHECK (parts >= 0),
    received       bytea NOT NULL,            -- bit n set: part n arrived whole
    overwrite      boolean NOT NULL DEFAULT false,
    sha256         text CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    reservation_id bigint,
    staging        text NOT NULL UNIQUE,      -- file name in the uploads directory
    state          text NOT NULL DEFAULT 'open'
                   CHECK (state IN ('open', 'completing', 'completed', 'aborted', 'expired')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL
);
CREATE INDEX uploads_open ON uploads (expires_at) WHERE state IN ('open', 'completing');

-- Why user uid may not start new instances or jobs now (over a storage
-- hard limit), or NULL when they may.
CREATE FUNCTION gc_storage_block_reason(uid bigint) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN e.bytes_hard IS NOT NULL AND e.bytes > e.bytes_hard THEN
            format('storage over its hard limit: %s of %s bytes used in your home;'
                   ' delete files and empty the trash first', e.bytes, e.bytes_hard)
        WHEN e.files_hard IS NOT NULL AND e.files > e.files_hard THEN
            format('storage over its hard limit: %s of %s files in your home;'
                   ' delete files and empty the trash first', e.files, e.files_hard)
        END
    FROM storage_effective e WHERE e.area = 'home:' || uid
$$;
