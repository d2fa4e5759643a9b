-- The usage interval rows of a statement's new allocations, in one INSERT.
--
-- 0034's row trigger called gc_usage_interval_insert() once per allocation,
-- and a call of that SQL function plans its body anew every time (~0.9 ms
-- here).  A scheduling pass that grants 8,000 slices writes them in one
-- statement: it spent 7 s in the trigger, ran past the server's 5 s
-- statement timeout, lost its connection (and the scheduler's lock) and
-- never committed; the next pass tried again.  A statement trigger with the
-- new rows as a transition table plans the INSERT once per statement.
-- The rows it writes are the ones the row trigger wrote.
CREATE FUNCTION gc_usage_alloc_insert_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_intervals (allocation_id, request_id, user_id, username, class_id,
                                 class_name, pool_id, pool_name, image_id, image_ref,
                                 owner_kind, owner_id, node_id, gpu_uuid, gpu_declared,
                                 slots_per_gpu, gpus, cpu_millis, mem_mib, started_at, ended_at)
    SELECT a.id, r.id, r.user_id, COALESCE(u.username, ''), r.class_id, c.name, r.pool_id,
           p.name, im.id, im.reference, r.owner_kind, r.owner_id, a.node_id, g.uuid,
           g.simulated, COALESCE(p.slots_per_gpu, 1),
           CASE WHEN a.slice_id IS NULL AND a.cpu_only THEN 0
                ELSE 1.0 / COALESCE(p.slots_per_gpu, 1) END,
           r.cpu_millis::double precision / greatest(r.slices, 1),
           r.mem_mib::double precision / greatest(r.slices, 1),
           a.allocated_at, a.released_at
    FROM gc_new_allocations a
    JOIN alloc_requests r ON r.id = a.request_id
    LEFT JOIN users u ON u.id = r.user_id
    LEFT JOIN classes c ON c.id = r.class_id
    LEFT JOIN pools p ON p.id = r.pool_id
    LEFT JOIN slices s ON s.id = a.slice_id
    LEFT JOIN gpus g ON g.id = s.gpu_id
    -- (a CASE: the planner may test a join's conditions in any order)
    LEFT JOIN instances i ON i.id = CASE WHEN r.owner_kind IN ('instance', 'tensorboard')
                                          AND r.owner_id ~ '^[0-9]{1,18}$'
                                         THEN r.owner_id::bigint END
    LEFT JOIN jobs j ON j.id = CASE WHEN r.owner_kind = 'job' AND r.owner_id ~ '^[0-9]{1,18}$'
                                    THEN r.owner_id::bigint END
    LEFT JOIN images im ON im.id = COALESCE(i.image_id, j.image_id)
    ON CONFLICT (allocation_id) DO NOTHING;
    RETURN NULL;
END
$$;

DROP TRIGGER allocations_usage_insert ON allocations;
CREATE TRIGGER allocations_usage_insert AFTER INSERT ON allocations
    REFERENCING NEW TABLE AS gc_new_allocations
    FOR EACH STATEMENT EXECUTE FUNCTION gc_usage_alloc_insert_trigger();
