-- 0005_quota_limits.sql — more per-user, per-pool limits: concurrent CPU
-- and memory, a GPU-hour budget over the last 7 days, and a maximum runtime
-- per allocation.  NULL means no limit.

ALTER TABLE quotas ALTER COLUMN max_slices DROP NOT NULL;
ALTER TABLE quotas
    ADD COLUMN max_cpu_millis     bigint CHECK (max_cpu_millis >= 0),
    ADD COLUMN max_mem_mib        bigint CHECK (max_mem_mib >= 0),
    ADD COLUMN gpu_hours_per_week double precision CHECK (gpu_hours_per_week >= 0),
    ADD COLUMN max_runtime_s      integer CHECK (max_runtime_s > 0);
