-- One copy of the usage interval's INSERT in the schema.
--
-- Since 0039 a statement trigger (gc_usage_alloc_insert_trigger) writes the
-- interval rows of new allocations.  0034's row form of the same INSERT,
-- gc_usage_interval_insert(), and the INSERT branch of gc_usage_alloc_trigger()
-- that called it no longer run; left in place, the two copies of one column
-- list would drift apart the day usage_intervals gains a column.  The row
-- trigger keeps its two live cases: a release and a delete.
CREATE OR REPLACE FUNCTION gc_usage_alloc_trigger() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        UPDATE usage_intervals SET ended_at = NEW.released_at
         WHERE allocation_id = NEW.id AND ended_at IS NULL;
        UPDATE usage_idle_periods SET ended_at = greatest(started_at, NEW.released_at),
               end_reason = COALESCE(end_reason, 'released')
         WHERE request_id = NEW.request_id AND ended_at IS NULL;
        RETURN NULL;
    END IF;
    -- DELETE (a cascade from its request or pool): the history stays, ended
    UPDATE usage_intervals SET ended_at = greatest(started_at, COALESCE(OLD.released_at, now()))
     WHERE allocation_id = OLD.id AND ended_at IS NULL;
    UPDATE usage_idle_periods SET ended_at = greatest(started_at, now()),
           end_reason = COALESCE(end_reason, 'released')
     WHERE request_id = OLD.request_id AND ended_at IS NULL;
    RETURN NULL;
END
$$;

DROP FUNCTION gc_usage_interval_insert(allocations);
