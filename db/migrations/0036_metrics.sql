-- 0036_metrics.sql — what /metrics reads cheaply.
--
-- The scheduler's wait histogram reads the requests allocated since its
-- last read (every metrics_refresh_ms, on every replica): by allocated_at,
-- which no index covered (released requests leave alloc_requests_live_idx).
CREATE INDEX alloc_requests_allocated_at_idx ON alloc_requests (allocated_at)
    WHERE allocated_at IS NOT NULL;
