-- 0022_job_last_metrics.sql — the latest value of each scalar a job reported
-- (GPUCLOUD_METRIC lines or its metrics file), kept on the job row so lists,
-- sweeps ("best run by val_loss") and the dashboard read it without the
-- metric series.  Written by the metrics collector; {} until the first one.
ALTER TABLE jobs ADD COLUMN last_metrics jsonb NOT NULL DEFAULT '{}'
    CHECK (jsonb_typeof(last_metrics) = 'object');
