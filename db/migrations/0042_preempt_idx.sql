-- The scheduler's release step asks every pass which allocated scavenger
-- work has outlived its grace since it was asked to make way.  Through
-- alloc_requests_live_idx that read every allocated request (4,805 of them
-- with a full bench cluster, ~0.8 ms a pass) to find the few, often none,
-- that were asked; this index holds only those.
CREATE INDEX alloc_requests_preempt_idx ON alloc_requests (preempt_requested_at)
    WHERE state = 'allocated' AND preempt_requested_at IS NOT NULL;
