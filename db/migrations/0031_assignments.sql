-- 0031_assignments.sql — class storage in containers, and assignments.
--
-- The class area (storage.c: classes/<id>/, group storage_class_gid(id)) is
-- mounted into the containers of the class's people at /class/<code or id>:
-- read-only for students and teaching assistants, read-write for the owner
-- and co-teachers.  Which classes: every active class the work's owner is in
-- now (gc_class_role not NULL), computed when the container is made, so a
-- member removed or suspended has none at the next start.  All of them, not
-- only the class of the work's class context (instances.class_id): a
-- student works on a class's material in any instance of theirs, class
-- context or not, and a mount shows nothing the member could not already
-- read through the file API.
--
-- Assignments (0028) gain when the late collect ran, and each student's row
-- the moment of the last snapshot's newest change (what the late collect
-- compares against).

CREATE FUNCTION gc_class_mounts(uid bigint) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(json_agg(json_build_object(
               'id', c.id, 'code', c.code, 'teacher', c.teacher_id,
               'write', gc_class_role(uid, c.id) IN ('owner', 'teacher'))
             ORDER BY c.id), '[]')::text
    FROM classes c
    WHERE c.state = 'active' AND gc_class_role(uid, c.id) IS NOT NULL
$$;

ALTER TABLE assignments
    ADD COLUMN late_collected_at timestamptz,
    ADD COLUMN updated_at        timestamptz NOT NULL DEFAULT now();

ALTER TABLE assignment_students
    ADD COLUMN changed_at timestamptz;

-- Containers a collect froze (Docker pause) while it copied their owner's
-- folder: a replica that dies before it thaws them leaves the rows, and the
-- leader unpauses what is left after 10 minutes.
CREATE TABLE assignment_pauses (
    node_id      bigint NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    container_id text NOT NULL,
    paused_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (node_id, container_id)
);
