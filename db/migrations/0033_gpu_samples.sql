-- 0033_gpu_samples.sql — measured GPU utilisation, per GPU and moment.
--
-- Written by the node sampler (nvidia-smi on nodes with NVIDIA tooling, or a
-- configured DCGM exporter); read by idle reclamation and accounting.  A
-- declared (simulated) GPU never gets a row: its utilisation is "not
-- measurable", never a made-up number.  Keyed by the GPU's UUID so a sample
-- maps to the allocation holding that GPU at that moment; no foreign key, so
-- removing a node keeps the history accounting reads.
CREATE TABLE gpu_samples (
    at           timestamptz NOT NULL DEFAULT now(),
    node_id      bigint NOT NULL,
    gpu_uuid     text NOT NULL,
    util_pct     real NOT NULL CHECK (util_pct >= 0 AND util_pct <= 100),
    mem_used_mib integer CHECK (mem_used_mib >= 0),
    PRIMARY KEY (gpu_uuid, at)
);
CREATE INDEX gpu_samples_at_idx ON gpu_samples (at);
