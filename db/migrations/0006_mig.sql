-- 0006_mig.sql — MIG instances of discovered GPUs, and MIG slices.
--
-- In a mig pool a slice is one MIG instance (hardware isolation); the
-- instance disappearing removes its slice, which fails while it is allocated.

CREATE TABLE gpu_mig (
    id      bigserial PRIMARY KEY,
    gpu_id  bigint NOT NULL REFERENCES gpus (id) ON DELETE CASCADE,
    idx     integer NOT NULL CHECK (idx >= 0),
    profile text NOT NULL,
    uuid    text NOT NULL,
    CONSTRAINT gpu_mig_uuid_key UNIQUE (uuid) DEFERRABLE INITIALLY DEFERRED,
    CONSTRAINT gpu_mig_gpu_idx_key UNIQUE (gpu_id, idx) DEFERRABLE INITIALLY DEFERRED
);

ALTER TABLE slices ADD COLUMN mig_id bigint REFERENCES gpu_mig (id) ON DELETE CASCADE;
