-- 0029_class_api.sql — the class object as /api/v1/classes shows it, and
-- each change of a class, its allocation and its roster as one statement.
--
-- Each gc_class_* function takes the caller (uid, and adm: whether they
-- are an admin) and answers jsonb: {"error": {"rc", "message", "hint"}}
-- when it refuses (rc: not_found, forbidden, invalid, conflict, exceeds;
-- nothing changed), else what it did.  A caller who is not in the class
-- (and not an admin) always gets not_found: a class's existence is not
-- revealed.  The checks run on the class row locked FOR UPDATE, so two
-- racing changes cannot together hand out more than the class holds.
--
-- Ranks: admin 5, owner 4, co-teacher 3, TA 2, student 1.  A caller may add,
-- change or remove only roster entries below their own rank, to roles below
-- it: nobody grants more than they hold, and only the owner (or an admin)
-- makes co-teachers.  A TA acts on the roster only with tas_manage_roster.

ALTER TABLE site_settings DROP CONSTRAINT site_settings_name_check;
ALTER TABLE site_settings ADD CONSTRAINT site_settings_name_check
    CHECK (name IN ('tensorboard_image', 'max_classes_per_teacher'));
-- '' (no cap) until an admin sets a number
INSERT INTO site_settings (name) VALUES ('max_classes_per_teacher');

CREATE FUNCTION gc_class_ts(t timestamptz) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;

CREATE FUNCTION gc_class_err(rc text, message text, hint text DEFAULT NULL,
                             details jsonb DEFAULT NULL) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('error', jsonb_build_object('rc', rc, 'message', message,
                                                          'hint', hint, 'details', details))
$$;

CREATE FUNCTION gc_class_rank(role text) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE role WHEN 'admin' THEN 5 WHEN 'owner' THEN 4 WHEN 'teacher' THEN 3
                     WHEN 'ta' THEN 2 WHEN 'student' THEN 1 ELSE 0 END
$$;

-- The class's storage cap: the area's override, else the class default.
CREATE FUNCTION gc_class_storage_cap(cid bigint) RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT COALESCE((SELECT a.bytes_hard FROM storage_areas a WHERE a.area = 'class:' || cid),
                    (SELECT d.class_bytes_hard FROM storage_defaults d))
$$;

-- The class object (NULL when the caller may not see it).  The invite's
-- state is shown to staff only.
CREATE FUNCTION gc_class_json(cid bigint, uid bigint, adm boolean) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', c.id, 'name', c.name, 'code', c.code, 'term', c.term,
        'description', c.description, 'state', c.state,
        'teacher', jsonb_build_object('id', t.id, 'username', t.username,
                                      'display_name', t.display_name),
        'co_teachers', (SELECT COALESCE(jsonb_agg(jsonb_build_object('id', u.id, 'username',
                                u.username, 'display_name', u.display_name) ORDER BY u.username),
                                '[]')
                        FROM class_members m JOIN users u ON u.id = m.user_id
                        WHERE m.class_id = c.id AND m.role = 'teacher' AND m.state = 'active'),
        'my_role', r.role,
        'pool', CASE WHEN p.id IS NOT NULL THEN jsonb_build_object('id', p.id, 'name', p.name,
                     'sharing', p.sharing,
                     'slices', (SELECT count(*) FROM slices s WHERE s.pool_id = p.id)) END,
        'allocation', jsonb_build_object('slices', c.alloc_slices,
                     'cpu_millis', c.alloc_cpu_millis, 'mem_mib', c.alloc_mem_mib,
                     'gpu_hours_week', c.alloc_gpu_hours_week,
                     'storage_bytes', (SELECT a.bytes_hard FROM storage_areas a
                                       WHERE a.area = 'class:' || c.id)),
        'student_limits', jsonb_build_object('slices', c.student_slices,
                     'cpu_millis', c.student_cpu_millis, 'mem_mib', c.student_mem_mib,
                     'storage_bytes', c.student_storage_bytes,
                     'gpu_hours_week', c.student_gpu_hours_week,
                     'max_session_s', c.student_max_session_s),
        'allowed_images', to_jsonb(c.allowed_images),
        'offhours_slices', c.offhours_slices, 'idle_timeout_s', c.idle_timeout_s,
        'max_lifetime_s', c.max_lifetime_s,
        'reach', jsonb_build_object('teachers_open_apps', c.teachers_open_apps,
                     'tas_open_apps', c.tas_open_apps, 'tas_stop_work', c.tas_stop_work,
                     'tas_manage_roster', c.tas_manage_roster),
        'data_policy', c.data_policy,
        'counts', (SELECT jsonb_build_object(
                     'students', count(*) FILTER (WHERE m.role = 'student' AND m.state = 'active'),
                     'tas', count(*) FILTER (WHERE m.role = 'ta' AND m.state = 'active'),
                     'teachers', 1 + count(*) FILTER (WHERE m.role = 'teacher'
                                                      AND m.state = 'active'),
                     'suspended', count(*) FILTER (WHERE m.state = 'suspended'))
                   FROM class_members m WHERE m.class_id = c.id),
        'created_at', gc_class_ts(c.created_at), 'archived_at', gc_class_ts(c.archived_at))
      || CASE WHEN adm OR r.role IN ('owner', 'teacher', 'ta') THEN jsonb_build_object(
             'invite', jsonb_build_object(
                 'active', c.invite_hash IS NOT NULL AND c.state = 'active'
                           AND c.invite_expires_at > now(),
                 'expires_at', CASE WHEN c.invite_hash IS NOT NULL
                                    THEN gc_class_ts(c.invite_expires_at) END))
         ELSE '{}'::jsonb END
    FROM classes c JOIN users t ON t.id = c.teacher_id
    LEFT JOIN pools p ON p.id = c.pool_id
    CROSS JOIN LATERAL (SELECT gc_class_role(uid, c.id) AS role) r
    WHERE c.id = cid AND (adm OR r.role IS NOT NULL)
$$;

-- A new class.  b: name, code, term, description, teacher_id (admins).
-- A teacher may own at most gc_setting('max_classes_per_teacher') active
-- classes ('' = no cap) when they create them themselves.
CREATE FUNCTION gc_class_create(uid bigint, adm boolean, b jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    tid bigint := uid;
    cap text := gc_setting('max_classes_per_teacher');
    n bigint;
    cid bigint;
    tu users%ROWTYPE;
BEGIN
    IF b ? 'teacher_id' AND b->'teacher_id' <> 'null' THEN
        IF NOT adm AND (b->>'teacher_id')::bigint <> uid THEN
            RETURN gc_class_err('forbidden', 'only an admin may name another teacher',
                                'leave teacher_id out: you teach the classes you create');
        END IF;
        tid := (b->>'teacher_id')::bigint;
    END IF;
    SELECT * INTO tu FROM users WHERE id = tid;
    IF tu.id IS NULL OR tu.deleted_at IS NOT NULL THEN
        RETURN gc_class_err('invalid', format('no such user %s', tid));
    END IF;
    IF tu.role NOT IN ('teacher', 'admin') THEN
        RETURN gc_class_err('invalid', format('user ''%s'' is a %s, not a teacher', tu.username,
                                              tu.role), 'make them a teacher first');
    END IF;
    -- serialise creations by one teacher so the cap holds
    PERFORM pg_advisory_xact_lock(727001, tid::integer);
    IF NOT adm AND cap ~ '^[0-9]+$' THEN
        SELECT count(*) INTO n FROM classes WHERE teacher_id = tid AND state = 'active';
        IF n >= cap::bigint THEN
            RETURN gc_class_err('conflict',
                format('you already teach %s active classes, the most an admin allows (%s)',
                       n, cap), 'archive a class you no longer teach, or ask an admin');
        END IF;
    END IF;
    BEGIN
        INSERT INTO classes (name, teacher_id, code, term, description)
        VALUES (b->>'name', tid, NULLIF(b->>'code', ''), COALESCE(b->>'term', ''),
                COALESCE(b->>'description', ''))
        RETURNING id INTO cid;
    EXCEPTION WHEN unique_violation THEN
        RETURN gc_class_err('conflict', CASE WHEN EXISTS (SELECT 1 FROM classes
                                                           WHERE name = b->>'name')
            THEN format('a class named ''%s'' exists already', b->>'name')
            ELSE format('the class code ''%s'' is taken', b->>'code') END,
            'pick another');
    WHEN check_violation THEN
        RETURN gc_class_err('invalid',
            'code must be 1 to 32 letters, digits, ''.'', ''_'' or ''-'', starting with a '
            'letter or digit');
    END;
    RETURN jsonb_build_object('class', gc_class_json(cid, uid, adm));
END
$$;

-- The staff check shared by the changes below: NULL when the caller may
-- change the class (teachers and admins), else the refusal.
CREATE FUNCTION gc_class_edit_check(c classes, uid bigint, adm boolean) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    r text;
BEGIN
    IF c.id IS NULL THEN
        RETURN gc_class_err('not_found', 'no such class');
    END IF;
    r := gc_class_role(uid, c.id);
    IF NOT adm AND r IS NULL THEN
        RETURN gc_class_err('not_found', format('no such class %s', c.id));
    END IF;
    IF NOT adm AND r NOT IN ('owner', 'teacher') THEN
        RETURN gc_class_err('forbidden', 'only the class''s teachers may change it');
    END IF;
    IF c.state = 'archived' THEN
        RETURN gc_class_err('conflict', format('class ''%s'' is archived', c.name),
                            'archived classes are read-only');
    END IF;
    RETURN NULL;
END
$$;

-- PATCH: b holds only fields the handler checked for type; null clears a
-- limit or policy.  Each student limit must fit in the class's own cap.
CREATE FUNCTION gc_class_patch(cid bigint, uid bigint, adm boolean, b jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    c classes%ROWTYPE;
    e jsonb;
    sl jsonb := COALESCE(b->'student_limits', '{}');
    rc jsonb := COALESCE(b->'reach', '{}');
    cap numeric;
    k text;
    v numeric;
    img bigint;
    tu users%ROWTYPE;
BEGIN
    SELECT * INTO c FROM classes WHERE id = cid FOR UPDATE;
    e := gc_class_edit_check(c, uid, adm);
    IF e IS NOT NULL THEN
        RETURN e;
    END IF;
    IF b ? 'teacher_id' THEN
        IF NOT adm THEN
            RETURN gc_class_err('forbidden', 'only an admin may change the class''s teacher');
        END IF;
        SELECT * INTO tu FROM users WHERE id = (b->>'teacher_id')::bigint;
        IF tu.id IS NULL OR tu.deleted_at IS NOT NULL OR tu.role NOT IN ('teacher', 'admin') THEN
            RETURN gc_class_err('invalid', format('user %s is not a teacher', b->>'teacher_id'));
        END IF;
    END IF;
    -- every student limit against the class's figure
    FOR k IN SELECT jsonb_object_keys(sl) LOOP
        CONTINUE WHEN sl->k = 'null';
        v := (sl->>k)::numeric;
        cap := CASE k WHEN 'slices' THEN c.alloc_slices
                      WHEN 'cpu_millis' THEN c.alloc_cpu_millis
                      WHEN 'mem_mib' THEN c.alloc_mem_mib
                      WHEN 'gpu_hours_week' THEN c.alloc_gpu_hours_week
                      WHEN 'storage_bytes' THEN gc_class_storage_cap(cid)
                      WHEN 'max_session_s' THEN c.max_lifetime_s END;
        IF k = 'max_session_s' AND b ? 'max_lifetime_s' THEN
            cap := (b->>'max_lifetime_s')::numeric;
        END IF;
        IF cap IS NOT NULL AND v > cap THEN
            RETURN gc_class_err('exceeds',
                format('student_limits.%s %s is more than the class holds (%s)', k, v, cap),
                CASE WHEN k = 'slices' AND cap = 0
                     THEN 'the class has no GPU allocation yet: ask an admin for one'
                     ELSE 'a student can get at most what the whole class holds' END,
                -- what the interface words in its own language
                jsonb_build_array(jsonb_build_object('what', 'class_' || k, 'most', cap,
                                                     'asked', v)));
        END IF;
    END LOOP;
    IF b ? 'offhours_slices' AND b->'offhours_slices' <> 'null'
       AND (b->>'offhours_slices')::integer > c.alloc_slices THEN
        RETURN gc_class_err('exceeds',
            format('offhours_slices %s is more than the class holds (%s)',
                   b->>'offhours_slices', c.alloc_slices));
    END IF;
    FOR img IN SELECT jsonb_array_elements_text(COALESCE(b->'allowed_images', '[]'))::bigint LOOP
        IF NOT EXISTS (SELECT 1 FROM images WHERE id = img AND owner_id IS NULL) THEN
            RETURN gc_class_err('invalid', format('image %s is not in the image catalog', img),
                                'pick images from the catalog');
        END IF;
    END LOOP;
    BEGIN
        UPDATE classes SET
            name = CASE WHEN b ? 'name' THEN b->>'name' ELSE name END,
            term = CASE WHEN b ? 'term' THEN COALESCE(b->>'term', '') ELSE term END,
            description = CASE WHEN b ? 'description' THEN COALESCE(b->>'description', '')
                               ELSE description END,
            teacher_id = COALESCE(tu.id, teacher_id),
            student_slices = CASE WHEN sl ? 'slices' THEN (sl->>'slices')::integer
                                  ELSE student_slices END,
            student_cpu_millis = CASE WHEN sl ? 'cpu_millis' THEN (sl->>'cpu_millis')::bigint
                                      ELSE student_cpu_millis END,
            student_mem_mib = CASE WHEN sl ? 'mem_mib' THEN (sl->>'mem_mib')::bigint
                                   ELSE student_mem_mib END,
            student_storage_bytes = CASE WHEN sl ? 'storage_bytes'
                                         THEN (sl->>'storage_bytes')::bigint
                                         ELSE student_storage_bytes END,
            student_gpu_hours_week = CASE WHEN sl ? 'gpu_hours_week'
                                          THEN (sl->>'gpu_hours_week')::double precision
                                          ELSE student_gpu_hours_week END,
            student_max_session_s = CASE WHEN sl ? 'max_session_s'
                                         THEN (sl->>'max_session_s')::integer
                                         ELSE student_max_session_s END,
            allowed_images = CASE WHEN b ? 'allowed_images'
                                  THEN ARRAY(SELECT DISTINCT jsonb_array_elements_text(
                                                 COALESCE(b->'allowed_images', '[]'))::bigint)
                                  ELSE allowed_images END,
            offhours_slices = CASE WHEN b ? 'offhours_slices' THEN (b->>'offhours_slices')::integer
                                   ELSE offhours_slices END,
            idle_timeout_s = CASE WHEN b ? 'idle_timeout_s' THEN (b->>'idle_timeout_s')::integer
                                  ELSE idle_timeout_s END,
            max_lifetime_s = CASE WHEN b ? 'max_lifetime_s' THEN (b->>'max_lifetime_s')::integer
                                  ELSE max_lifetime_s END,
            teachers_open_apps = COALESCE((rc->>'teachers_open_apps')::boolean,
                                          teachers_open_apps),
            tas_open_apps = COALESCE((rc->>'tas_open_apps')::boolean, tas_open_apps),
            tas_stop_work = COALESCE((rc->>'tas_stop_work')::boolean, tas_stop_work),
            tas_manage_roster = COALESCE((rc->>'tas_manage_roster')::boolean, tas_manage_roster),
            data_policy = COALESCE(b->>'data_policy', data_policy),
            updated_at = now()
        WHERE id = cid;
    EXCEPTION WHEN unique_violation THEN
        RETURN gc_class_err('conflict', format('a class named ''%s'' exists already', b->>'name'),
                            'pick another name');
    END;
    IF tu.id IS NOT NULL THEN
        -- the new owner is no longer a mere member
        DELETE FROM class_members WHERE class_id = cid AND user_id = tu.id;
    END IF;
    RETURN jsonb_build_object('class', gc_class_json(cid, uid, adm));
END
$$;

-- The allocation an admin grants (a PUT: absent = none).  b: pool (a name,
-- or null), slices, cpu_millis, mem_mib, gpu_hours_week, storage_bytes.
CREATE FUNCTION gc_class_allocate(cid bigint, uid bigint, b jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    c classes%ROWTYPE;
    p pools%ROWTYPE;
    n bigint;
    sl integer := COALESCE((b->>'slices')::integer, 0);
    st bigint := (b->>'storage_bytes')::bigint;
BEGIN
    SELECT * INTO c FROM classes WHERE id = cid FOR UPDATE;
    IF c.id IS NULL THEN
        RETURN gc_class_err('not_found', format('no such class %s', cid));
    END IF;
    IF b->>'pool' IS NOT NULL THEN
        SELECT * INTO p FROM pools WHERE name = b->>'pool';
        IF p.id IS NULL THEN
            RETURN gc_class_err('invalid', format('no such pool ''%s''', b->>'pool'));
        END IF;
        SELECT count(*) INTO n FROM slices WHERE pool_id = p.id;
        IF sl > n THEN
            RETURN gc_class_err('exceeds',
                format('pool ''%s'' has %s slices; the allocation asks %s', p.name, n, sl),
                'grant at most the pool''s slices');
        END IF;
    ELSIF sl > 0 THEN
        RETURN gc_class_err('invalid', 'slices need a pool', 'name the pool they come from');
    END IF;
    IF c.student_slices IS NOT NULL AND c.student_slices > sl THEN
        RETURN gc_class_err('conflict',
            format('each student may hold %s slices (student_limits.slices); the allocation '
                   'cannot go below that', c.student_slices),
            'lower the students'' limit first');
    END IF;
    IF c.offhours_slices IS NOT NULL AND c.offhours_slices > sl THEN
        RETURN gc_class_err('conflict',
            format('offhours_slices is %s; the allocation cannot go below that',
                   c.offhours_slices), 'lower offhours_slices first');
    END IF;
    IF c.student_cpu_millis > (b->>'cpu_millis')::bigint
       OR c.student_mem_mib > (b->>'mem_mib')::bigint
       OR c.student_gpu_hours_week > (b->>'gpu_hours_week')::double precision
       OR c.student_storage_bytes > st THEN
        RETURN gc_class_err('conflict',
            'a student''s limit is above the new allocation (cpu, memory, GPU-hours or '
            'storage)', 'lower the students'' limits first');
    END IF;
    UPDATE classes SET pool_id = p.id, alloc_slices = sl,
        alloc_cpu_millis = (b->>'cpu_millis')::bigint, alloc_mem_mib = (b->>'mem_mib')::bigint,
        alloc_gpu_hours_week = (b->>'gpu_hours_week')::double precision, updated_at = now()
    WHERE id = cid;
    INSERT INTO storage_areas (area, class_id, bytes_hard) VALUES ('class:' || cid, cid, st)
    ON CONFLICT (area) DO UPDATE SET bytes_hard = EXCLUDED.bytes_hard;
    RETURN jsonb_build_object('class', gc_class_json(cid, uid, true));
END
$$;

-- DELETE: an admin always; the owner of a class with no members and no
-- work (else: archive it).
CREATE FUNCTION gc_class_delete(cid bigint, uid bigint, adm boolean) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    c classes%ROWTYPE;
    r text;
BEGIN
    SELECT * INTO c FROM classes WHERE id = cid FOR UPDATE;
    r := gc_class_role(uid, cid);
    IF c.id IS NULL OR (NOT adm AND r IS NULL) THEN
        RETURN gc_class_err('not_found', format('no such class %s', cid));
    END IF;
    IF NOT adm THEN
        IF r <> 'owner' THEN
            RETURN gc_class_err('forbidden', 'only the class''s owner or an admin may delete it');
        END IF;
        IF EXISTS (SELECT 1 FROM class_members WHERE class_id = cid)
           OR EXISTS (SELECT 1 FROM instances WHERE class_id = cid)
           OR EXISTS (SELECT 1 FROM jobs WHERE class_id = cid)
           OR EXISTS (SELECT 1 FROM assignments WHERE class_id = cid) THEN
            RETURN gc_class_err('conflict', format('class ''%s'' has members or work', c.name),
                                'archive it at the end of term instead');
        END IF;
    END IF;
    DELETE FROM classes WHERE id = cid;
    RETURN jsonb_build_object('deleted', jsonb_build_object('id', cid, 'name', c.name));
END
$$;

-- The roster: who may act, in one place.  NULL when the caller (rank
-- from their class role, admin 5) may act on entries of rank < theirs.
CREATE FUNCTION gc_class_roster_check(c classes, uid bigint, adm boolean) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    r text;
BEGIN
    r := gc_class_role(uid, c.id);
    IF c.id IS NULL OR (NOT adm AND r IS NULL) THEN
        RETURN gc_class_err('not_found', 'no such class');
    END IF;
    IF NOT adm AND (r = 'student' OR (r = 'ta' AND NOT c.tas_manage_roster)) THEN
        RETURN gc_class_err('forbidden', CASE r WHEN 'ta'
            THEN 'this class does not let teaching assistants change the roster'
            ELSE 'only the class''s teachers may change the roster' END);
    END IF;
    IF c.state = 'archived' THEN
        RETURN gc_class_err('conflict', format('class ''%s'' is archived', c.name),
                            'archived classes are read-only');
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION gc_class_member_json(cid bigint, muid bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('user', jsonb_build_object('id', u.id, 'username', u.username,
                                  'display_name', u.display_name, 'email', u.email),
                              'role', m.role, 'state', m.state, 'via', m.via,
                              'added_at', gc_class_ts(m.added_at),
                              'added_by', (SELECT a.username FROM users a WHERE a.id = m.added_by))
    FROM class_members m JOIN users u ON u.id = m.user_id
    WHERE m.class_id = cid AND m.user_id = muid
$$;

-- Adds (op 'add': b.user_id, b.role), changes (op 'set': b.role?,
-- b.state?) or removes (op 'remove') one roster entry.
CREATE FUNCTION gc_class_member(cid bigint, uid bigint, adm boolean, op text, muid bigint,
                                b jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    c classes%ROWTYPE;
    e jsonb;
    mine integer;
    m class_members%ROWTYPE;
    u users%ROWTYPE;
    newrole text := b->>'role';
BEGIN
    SELECT * INTO c FROM classes WHERE id = cid FOR UPDATE;
    e := gc_class_roster_check(c, uid, adm);
    IF e IS NOT NULL THEN
        RETURN e;
    END IF;
    mine := CASE WHEN adm THEN 5 ELSE gc_class_rank(gc_class_role(uid, cid)) END;
    SELECT * INTO u FROM users WHERE id = muid;
    IF u.id IS NULL OR (op = 'add' AND u.deleted_at IS NOT NULL) THEN
        RETURN gc_class_err('not_found', format('no such user %s',
                                                COALESCE(b->>'username', muid::text)));
    END IF;
    IF newrole IS NOT NULL AND gc_class_rank(newrole) >= mine THEN
        RETURN gc_class_err('forbidden',
            format('you cannot make anyone a %s of this class', newrole),
            'only the owner (or an admin) adds co-teachers; teachers add assistants and '
            'students');
    END IF;
    IF newrole = 'teacher' AND u.role NOT IN ('teacher', 'admin') THEN
        RETURN gc_class_err('invalid', format('user ''%s'' is a %s, not a teacher',
                                              u.username, u.role));
    END IF;
    IF c.teacher_id = muid THEN
        RETURN gc_class_err('conflict', format('''%s'' owns the class', u.username),
                            'an admin changes the owner with PATCH teacher_id');
    END IF;
    SELECT * INTO m FROM class_members WHERE class_id = cid AND user_id = muid;
    IF op = 'add' THEN
        IF m.user_id IS NOT NULL THEN
            RETURN gc_class_err('conflict', format('''%s'' is in the class already (as %s, %s)',
                                                   u.username, m.role, m.state),
                                'change their entry instead');
        END IF;
        INSERT INTO class_members (class_id, user_id, role, via, added_by)
        VALUES (cid, muid, COALESCE(newrole, 'student'), 'added', uid);
    ELSE
        IF m.user_id IS NULL THEN
            RETURN gc_class_err('not_found', format('''%s'' is not in the class', u.username));
        END IF;
        IF gc_class_rank(m.role) >= mine THEN
            RETURN gc_class_err('forbidden', format('you cannot change a %s''s entry', m.role));
        END IF;
        IF op = 'remove' THEN
            DELETE FROM class_members WHERE class_id = cid AND user_id = muid;
            RETURN jsonb_build_object('member', jsonb_build_object('user', jsonb_build_object(
                'id', u.id, 'username', u.username), 'role', m.role, 'state', 'removed'));
        END IF;
        UPDATE class_members SET role = COALESCE(newrole, role),
            state = COALESCE(b->>'state', state), updated_at = now()
        WHERE class_id = cid AND user_id = muid;
    END IF;
    RETURN jsonb_build_object('member', gc_class_member_json(cid, muid));
END
$$;

-- The roster list (staff only: students and strangers get not_found).
CREATE FUNCTION gc_class_members(cid bigint, uid bigint, adm boolean) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    r text := gc_class_role(uid, cid);
BEGIN
    IF NOT EXISTS (SELECT 1 FROM classes WHERE id = cid)
       OR (NOT adm AND (r IS NULL OR r = 'student')) THEN
        RETURN gc_class_err('not_found', format('no such class %s', cid));
    END IF;
    RETURN jsonb_build_object('items', COALESCE((
        SELECT jsonb_agg(x.j ORDER BY x.rank DESC, x.username)
        FROM (SELECT jsonb_build_object('user', jsonb_build_object('id', u.id, 'username',
                         u.username, 'display_name', u.display_name, 'email', u.email),
                         'role', 'owner', 'state', 'active', 'via', 'added',
                         'added_at', gc_class_ts(c.created_at), 'added_by', NULL) AS j,
                     4 AS rank, u.username
              FROM classes c JOIN users u ON u.id = c.teacher_id WHERE c.id = cid
              UNION ALL
              SELECT gc_class_member_json(cid, m.user_id), gc_class_rank(m.role), u.username
              FROM class_members m JOIN users u ON u.id = m.user_id
              WHERE m.class_id = cid) x), '[]'));
END
$$;

-- Invite codes: only the hash is kept.  h NULL disables the invite.
CREATE FUNCTION gc_class_invite(cid bigint, uid bigint, adm boolean, h text, ttl integer)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    c classes%ROWTYPE;
    e jsonb;
BEGIN
    SELECT * INTO c FROM classes WHERE id = cid FOR UPDATE;
    e := gc_class_roster_check(c, uid, adm);
    IF e IS NOT NULL THEN
        RETURN e;
    END IF;
    UPDATE classes SET invite_hash = h,
        invite_expires_at = CASE WHEN h IS NULL THEN NULL
                                 ELSE now() + make_interval(secs => ttl) END
    WHERE id = cid RETURNING * INTO c;
    RETURN jsonb_build_object('expires_at', gc_class_ts(c.invite_expires_at),
                              'class', jsonb_build_object('id', c.id, 'name', c.name));
END
$$;

-- Joining by invite code (its hash): any signed-in user becomes an active
-- student; already in it: the class as it is.
CREATE FUNCTION gc_class_join(uid bigint, adm boolean, h text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    c classes%ROWTYPE;
    m class_members%ROWTYPE;
BEGIN
    SELECT * INTO c FROM classes WHERE invite_hash = h FOR UPDATE;
    IF c.id IS NULL THEN
        RETURN gc_class_err('not_found', 'this invite code is not valid (or was replaced)',
                            'ask your teacher for a new link');
    END IF;
    IF c.state = 'archived' THEN
        RETURN gc_class_err('conflict', format('class ''%s'' is archived', c.name),
                            'ask your teacher');
    END IF;
    IF c.invite_expires_at <= now() THEN
        RETURN gc_class_err('conflict', format('this invite code expired at %s',
                                               gc_class_ts(c.invite_expires_at)),
                            'ask your teacher for a new link');
    END IF;
    SELECT * INTO m FROM class_members WHERE class_id = c.id AND user_id = uid;
    IF m.state = 'suspended' THEN
        RETURN gc_class_err('forbidden', format('you are suspended from class ''%s''', c.name),
                            'ask your teacher');
    END IF;
    IF m.user_id IS NULL AND c.teacher_id <> uid THEN
        INSERT INTO class_members (class_id, user_id, role, via)
        VALUES (c.id, uid, 'student', 'invite');
        RETURN jsonb_build_object('joined', true, 'class', gc_class_json(c.id, uid, adm));
    END IF;
    RETURN jsonb_build_object('joined', false, 'class', gc_class_json(c.id, uid, adm));
END
$$;

-- The roster import: rows [{line, username, display_name, email, role,
-- password_hash?}] (checked for shape by the handler).  Each row becomes
-- 'create' (no such account: a student account with a one-time password),
-- 'link' (an account: added to the class), 'already' (in the class) or an
-- error.  apply false only reports; apply true does it all or nothing
-- (any error: nothing changes; a 'create' row needs its password_hash).
CREATE FUNCTION gc_class_import(cid bigint, uid bigint, adm boolean, rows jsonb, apply boolean)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    c classes%ROWTYPE;
    e jsonb;
    mine integer;
    x record;
    u users%ROWTYPE;
    m class_members%ROWTYPE;
    out jsonb := '[]';
    act text;
    msg text;
    bad integer := 0;
    nid bigint;
BEGIN
    SELECT * INTO c FROM classes WHERE id = cid FOR UPDATE;
    e := gc_class_roster_check(c, uid, adm);
    IF e IS NOT NULL THEN
        RETURN e;
    END IF;
    mine := CASE WHEN adm THEN 5 ELSE gc_class_rank(gc_class_role(uid, cid)) END;
    BEGIN -- a subtransaction: a problem found while applying undoes it all
    FOR x IN SELECT * FROM jsonb_to_recordset(rows) AS t(line integer, username text,
             display_name text, email text, role text, password_hash text) LOOP
        act := NULL;
        msg := NULL;
        u := NULL;
        m := NULL;
        SELECT * INTO u FROM users WHERE username = x.username;
        IF gc_class_rank(x.role) >= mine THEN
            msg := format('you cannot make anyone a %s of this class', x.role);
        ELSIF u.id IS NULL THEN
            IF x.role = 'teacher' THEN
                msg := format('no account ''%s'': co-teachers must have a teacher account',
                              x.username);
            ELSE
                act := 'create';
            END IF;
        ELSIF u.deleted_at IS NOT NULL THEN
            msg := format('username ''%s'' belongs to a deleted account', x.username);
        ELSIF u.id = c.teacher_id THEN
            act := 'already';
        ELSIF x.role = 'teacher' AND u.role NOT IN ('teacher', 'admin') THEN
            msg := format('user ''%s'' is a %s, not a teacher', x.username, u.role);
        ELSE
            SELECT * INTO m FROM class_members WHERE class_id = cid AND user_id = u.id;
            act := CASE WHEN m.user_id IS NULL THEN 'link' ELSE 'already' END;
        END IF;
        IF msg IS NOT NULL AND apply THEN
            RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = format('line %s: %s', x.line, msg);
        END IF;
        IF msg IS NOT NULL THEN
            bad := bad + 1;
            out := out || jsonb_build_array(jsonb_build_object('line', x.line, 'username',
                       x.username, 'action', 'error', 'message', msg));
            CONTINUE;
        END IF;
        nid := u.id;
        IF apply AND act = 'create' THEN
            IF x.password_hash IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = 'P0001',
                    MESSAGE = format('line %s: no password for the new account ''%s''',
                                     x.line, x.username);
            END IF;
            INSERT INTO users (username, display_name, email, role, password_hash, created_by,
                               must_change_password)
            VALUES (x.username, COALESCE(x.display_name, ''), COALESCE(x.email, ''),
                    'student', x.password_hash, uid, true)
            RETURNING id INTO nid;
        END IF;
        IF apply AND act IN ('create', 'link') THEN
            INSERT INTO class_members (class_id, user_id, role, via, added_by)
            VALUES (cid, nid, x.role, 'csv', uid);
        END IF;
        out := out || jsonb_build_array(jsonb_build_object('line', x.line, 'username',
                   x.username, 'action', act, 'role', x.role, 'user_id', nid,
                   'display_name', COALESCE(NULLIF(u.display_name, ''), x.display_name, ''),
                   'state', m.state));
    END LOOP;
    EXCEPTION WHEN raise_exception THEN
        RETURN gc_class_err('conflict', SQLERRM || ' (the roster changed meanwhile); nothing '
                            'was imported', 'check the file again');
    WHEN unique_violation THEN
        RETURN gc_class_err('conflict', 'an account was created meanwhile; nothing was '
                            'imported', 'check the file again');
    END;
    RETURN jsonb_build_object('rows', out, 'errors', bad,
                              'class', jsonb_build_object('id', c.id, 'name', c.name));
END
$$;
