-- A counter of the cluster's shape for the scheduler: which slices exist, of
-- which pool, on which GPU of which node.  Every pass needs that shape (8,000
-- slices joined to their GPUs took ~4 ms of each pass with the bench's
-- cluster), yet it changes only when an admin declares or removes GPUs, a
-- node's discovered GPUs change, or a pool is re-cut.  The leader keeps the
-- shape it read with the version it read in the same snapshot, and reads it
-- again only when the version moved; which request holds each slice is read
-- every pass.
--
-- Statement triggers bump it after the statement's own row changes, so a
-- writer takes this row's lock last and holds it to its commit; and only
-- when rows really changed: node checks run their GPU statements (a delete
-- of GPUs gone, an update of those present) every few seconds, mostly
-- changing nothing.
CREATE TABLE sched_topology (
    one     boolean PRIMARY KEY DEFAULT true CHECK (one),
    version bigint NOT NULL DEFAULT 0
);
INSERT INTO sched_topology DEFAULT VALUES;

-- an INSERT or DELETE statement that touched rows (its transition table)
CREATE FUNCTION gc_topology_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM gc_topo_rows) THEN
        UPDATE sched_topology SET version = version + 1;
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION gc_topology_truncate() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sched_topology SET version = version + 1;
    RETURN NULL;
END $$;

CREATE FUNCTION gc_topology_gpus_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM gc_topo_old o JOIN gc_topo_new n ON n.id = o.id
               WHERE n.node_id IS DISTINCT FROM o.node_id OR n.idx IS DISTINCT FROM o.idx) THEN
        UPDATE sched_topology SET version = version + 1;
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION gc_topology_slices_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM gc_topo_old o JOIN gc_topo_new n ON n.id = o.id
               WHERE n.pool_id IS DISTINCT FROM o.pool_id
                  OR n.gpu_id IS DISTINCT FROM o.gpu_id) THEN
        UPDATE sched_topology SET version = version + 1;
    END IF;
    RETURN NULL;
END $$;

-- on both tables: rows inserted or deleted (cascades from nodes and pools
-- included), a TRUNCATE, and updates that move a slice or a GPU
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['slices', 'gpus'] LOOP
        EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS gc_topo_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION gc_topology_rows()',
                       t || '_topology_insert', t);
        EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS gc_topo_rows'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION gc_topology_rows()',
                       t || '_topology_delete', t);
        EXECUTE format('CREATE TRIGGER %I AFTER TRUNCATE ON %I'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION gc_topology_truncate()',
                       t || '_topology_truncate', t);
        EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I'
                       ' REFERENCING OLD TABLE AS gc_topo_old NEW TABLE AS gc_topo_new'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION %I()',
                       t || '_topology_update', t, 'gc_topology_' || t || '_updated');
    END LOOP;
END $$;
