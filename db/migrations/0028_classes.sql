-- 0028_classes.sql — the class object.
--
-- 0009 made a minimal classes table (name, teacher) and its members for the
-- class storage area; this grows them into the class: code, term, state, the
-- allocation an admin grants it from one pool, the limits each student gets
-- inside it, its policies; the roster with roles (co-teachers, teaching
-- assistants, students) and suspension; lab sessions (time windows, one-off
-- or weekly, each reserving slices of the class's pool for its members);
-- notices; assignments and each student's state of each.
--
-- Work started in a class's context (an instance, a job) carries the class
-- (alloc_requests.class_id and the workload's own class_id), so the
-- scheduler can hold student ⊂ class ⊂ pool and accounting can group by
-- class.

ALTER TABLE classes
    ADD COLUMN code                 text UNIQUE
                                    CHECK (code ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$'),
    ADD COLUMN term                 text NOT NULL DEFAULT '' CHECK (length(term) <= 100),
    ADD COLUMN description          text NOT NULL DEFAULT '' CHECK (length(description) <= 4000),
    ADD COLUMN state                text NOT NULL DEFAULT 'active'
                                    CHECK (state IN ('active', 'archived')),
    -- the allocation an admin grants: slices of one pool at once (0 with no
    -- pool: the class has no GPUs), and optional cpu, memory and GPU-hour caps
    -- for all its members' class work together; NULL = no cap
    ADD COLUMN pool_id              bigint REFERENCES pools (id) ON DELETE SET NULL,
    ADD COLUMN alloc_slices         integer NOT NULL DEFAULT 0 CHECK (alloc_slices >= 0),
    ADD COLUMN alloc_cpu_millis     bigint CHECK (alloc_cpu_millis >= 0),
    ADD COLUMN alloc_mem_mib        bigint CHECK (alloc_mem_mib >= 0),
    ADD COLUMN alloc_gpu_hours_week double precision CHECK (alloc_gpu_hours_week >= 0),
    -- what each student may hold inside the allocation (NULL = up to the
    -- class's own cap); the class storage area's limit stays in storage_areas
    ADD COLUMN student_slices       integer CHECK (student_slices >= 0),
    ADD COLUMN student_cpu_millis   bigint CHECK (student_cpu_millis >= 0),
    ADD COLUMN student_mem_mib      bigint CHECK (student_mem_mib >= 0),
    ADD COLUMN student_storage_bytes bigint CHECK (student_storage_bytes >= 0),
    ADD COLUMN student_gpu_hours_week double precision CHECK (student_gpu_hours_week >= 0),
    ADD COLUMN student_max_session_s integer CHECK (student_max_session_s > 0),
    -- catalog images members may run in the class (empty: all they may see)
    ADD COLUMN allowed_images       bigint[] NOT NULL DEFAULT '{}',
    -- slices of the allocation members may use outside lab sessions (NULL:
    -- all of it; 0: only inside sessions)
    ADD COLUMN offhours_slices      integer CHECK (offhours_slices >= 0),
    -- idle and lifetime policies for class work (NULL: the role's)
    ADD COLUMN idle_timeout_s       integer CHECK (idle_timeout_s > 0),
    ADD COLUMN max_lifetime_s       integer CHECK (max_lifetime_s > 0),
    -- teacher reach: may teachers / TAs open a student's apps, stop their work
    ADD COLUMN teachers_open_apps   boolean NOT NULL DEFAULT true,
    ADD COLUMN tas_open_apps        boolean NOT NULL DEFAULT false,
    ADD COLUMN tas_stop_work        boolean NOT NULL DEFAULT false,
    ADD COLUMN tas_manage_roster    boolean NOT NULL DEFAULT false,
    -- invite: only the code's hash is kept
    ADD COLUMN invite_hash          char(64) UNIQUE,
    ADD COLUMN invite_expires_at    timestamptz,
    -- end of term: what happens to the class area and students' class work
    ADD COLUMN data_policy          text NOT NULL DEFAULT 'keep'
                                    CHECK (data_policy IN ('keep', 'remove')),
    ADD COLUMN archived_at          timestamptz,
    ADD COLUMN updated_at           timestamptz NOT NULL DEFAULT now(),
    ADD CONSTRAINT classes_pool_alloc CHECK (pool_id IS NOT NULL OR alloc_slices = 0),
    ADD CONSTRAINT classes_student_in_class CHECK (student_slices IS NULL OR student_slices <= alloc_slices);

ALTER TABLE class_members
    ADD COLUMN role       text NOT NULL DEFAULT 'student' CHECK (role IN ('student', 'ta', 'teacher')),
    ADD COLUMN state      text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'suspended')),
    ADD COLUMN via        text NOT NULL DEFAULT 'added' CHECK (via IN ('added', 'csv', 'invite')),
    ADD COLUMN added_by   bigint REFERENCES users (id) ON DELETE SET NULL,
    ADD COLUMN added_at   timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX class_members_class_role ON class_members (class_id, role);

-- The caller's standing in a class: 'owner' (classes.teacher_id), 'teacher'
-- (co-teacher), 'ta', 'student', or NULL (not in it, or suspended).  Admins
-- are not special here: callers check the role of the user first.
CREATE FUNCTION gc_class_role(uid bigint, cid bigint) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN c.teacher_id = uid THEN 'owner' ELSE m.role END
    FROM classes c
    LEFT JOIN class_members m ON m.class_id = c.id AND m.user_id = uid AND m.state = 'active'
    WHERE c.id = cid
$$;

-- Lab sessions: windows in which `slices` slices of the class's pool are
-- held for its members.  Weekly ones repeat every 7 days from starts_at
-- until repeat_until (inclusive of a window starting that day).
CREATE TABLE class_sessions (
    id           bigserial PRIMARY KEY,
    class_id     bigint NOT NULL REFERENCES classes (id) ON DELETE CASCADE,
    title        text NOT NULL DEFAULT '' CHECK (length(title) <= 200),
    starts_at    timestamptz NOT NULL,
    ends_at      timestamptz NOT NULL,
    repeat_until date,
    slices       integer NOT NULL DEFAULT 0 CHECK (slices >= 0),
    created_by   bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    cancelled_at timestamptz,
    CHECK (ends_at > starts_at AND ends_at <= starts_at + interval '24 hours')
);
CREATE INDEX class_sessions_class ON class_sessions (class_id, starts_at);

-- Notices a teacher posts to the class (shown to members in the UI).
CREATE TABLE class_notices (
    id         bigserial PRIMARY KEY,
    class_id   bigint NOT NULL REFERENCES classes (id) ON DELETE CASCADE,
    author_id  bigint REFERENCES users (id) ON DELETE SET NULL,
    body       text NOT NULL CHECK (length(body) BETWEEN 1 AND 4000),
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz
);
CREATE INDEX class_notices_class ON class_notices (class_id, created_at DESC);

-- Assignments: a folder of the class area released into every student's
-- home (as `classes/<class code or id>/<name>/`) and collected at the
-- deadline into the class area (`collected/<name>/<username>/`).
CREATE TABLE assignments (
    id           bigserial PRIMARY KEY,
    class_id     bigint NOT NULL REFERENCES classes (id) ON DELETE CASCADE,
    name         text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'),
    source       text NOT NULL CHECK (length(source) BETWEEN 1 AND 1024),
    description  text NOT NULL DEFAULT '' CHECK (length(description) <= 4000),
    state        text NOT NULL DEFAULT 'draft'
                 CHECK (state IN ('draft', 'released', 'collecting', 'collected')),
    deadline     timestamptz,
    late_until   timestamptz,
    released_at  timestamptz,
    collected_at timestamptz,
    created_by   bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (class_id, name),
    CHECK (late_until IS NULL OR (deadline IS NOT NULL AND late_until >= deadline))
);

CREATE TABLE assignment_students (
    assignment_id bigint NOT NULL REFERENCES assignments (id) ON DELETE CASCADE,
    user_id       bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    status        text NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'released', 'collected', 'late', 'missing',
                                    'returned', 'failed')),
    released_at   timestamptz,
    collected_at  timestamptz,
    late          boolean NOT NULL DEFAULT false,
    files         bigint NOT NULL DEFAULT 0,
    bytes         bigint NOT NULL DEFAULT 0,
    returned_at   timestamptz,
    message       text NOT NULL DEFAULT '',
    PRIMARY KEY (assignment_id, user_id)
);
CREATE INDEX assignment_students_user ON assignment_students (user_id);

-- Work in a class's context.
ALTER TABLE alloc_requests ADD COLUMN class_id bigint REFERENCES classes (id) ON DELETE SET NULL;
ALTER TABLE instances ADD COLUMN class_id bigint REFERENCES classes (id) ON DELETE SET NULL;
ALTER TABLE jobs ADD COLUMN class_id bigint REFERENCES classes (id) ON DELETE SET NULL;
CREATE INDEX alloc_requests_class_live ON alloc_requests (class_id)
    WHERE class_id IS NOT NULL AND state IN ('queued', 'allocated');
CREATE INDEX instances_class ON instances (class_id) WHERE class_id IS NOT NULL;
CREATE INDEX jobs_class ON jobs (class_id) WHERE class_id IS NOT NULL;

-- GPU-seconds of class work per class, student and day (the class's and
-- each student's weekly budget; the class dashboard); gc_release_request
-- adds to it beside gpu_usage.
CREATE TABLE class_gpu_usage (
    class_id    bigint NOT NULL REFERENCES classes (id) ON DELETE CASCADE,
    user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    day         date NOT NULL,
    gpu_seconds double precision NOT NULL DEFAULT 0 CHECK (gpu_seconds >= 0),
    PRIMARY KEY (class_id, user_id, day)
);

-- Lab-session windows open now: the slices each holds for its class in the
-- class's pool, and when the window closes.  A weekly session's occurrence
-- k starts at starts_at + k weeks (k >= 0; dates up to repeat_until); a
-- window is at most 24 hours, so only the latest start can be open.
CREATE FUNCTION gc_class_reserved_now()
RETURNS TABLE (session_id bigint, class_id bigint, pool_id bigint, slices integer,
               ends_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT s.id, s.class_id, c.pool_id, s.slices, o.st + (s.ends_at - s.starts_at)
    FROM class_sessions s JOIN classes c ON c.id = s.class_id
    CROSS JOIN LATERAL (SELECT s.starts_at + floor(extract(epoch FROM now() - s.starts_at)
                                                   / 604800) * interval '7 days' AS st) o
    WHERE s.cancelled_at IS NULL AND c.state = 'active' AND c.pool_id IS NOT NULL
      AND s.slices > 0 AND now() >= s.starts_at
      AND now() < o.st + (s.ends_at - s.starts_at)
      AND (o.st = s.starts_at OR (s.repeat_until IS NOT NULL AND o.st::date <= s.repeat_until))
$$;
