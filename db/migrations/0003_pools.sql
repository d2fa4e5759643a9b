-- 0003_pools.sql — GPU pools and their slices.
--
-- A GPU belongs to at most one pool (a column on gpus, so this cannot be
-- violated).  A slice is the allocatable unit: the whole GPU in an exclusive
-- pool, one of slots_per_gpu slots in a shared pool.  Slices are made and
-- removed with the GPU's pool membership.

CREATE TYPE pool_sharing AS ENUM ('exclusive', 'mig', 'shared');

CREATE TABLE pools (
    id                  bigserial PRIMARY KEY,
    name                text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    description         text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    sharing             pool_sharing NOT NULL DEFAULT 'exclusive',
    slots_per_gpu       integer NOT NULL DEFAULT 1 CHECK (slots_per_gpu BETWEEN 1 AND 64),
    memory_per_slot_mib bigint CHECK (memory_per_slot_mib > 0),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CHECK (sharing = 'shared' OR slots_per_gpu = 1),
    CHECK (sharing <> 'shared' OR memory_per_slot_mib IS NOT NULL)
);

ALTER TABLE gpus ADD COLUMN pool_id bigint REFERENCES pools (id) ON DELETE SET NULL;
ALTER TABLE gpus ADD CONSTRAINT gpus_id_pool_key UNIQUE (id, pool_id);
CREATE INDEX gpus_pool_idx ON gpus (pool_id);

CREATE TABLE slices (
    id      bigserial PRIMARY KEY,
    pool_id bigint NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    gpu_id  bigint NOT NULL REFERENCES gpus (id) ON DELETE CASCADE,
    slot    integer NOT NULL CHECK (slot >= 0),
    -- deferred, so a pool's slices can be remade in one statement
    CONSTRAINT slices_gpu_slot_key UNIQUE (gpu_id, slot) DEFERRABLE INITIALLY DEFERRED,
    -- a slice is always of its GPU's pool: moving a GPU means new slices
    FOREIGN KEY (gpu_id, pool_id) REFERENCES gpus (id, pool_id)
);
CREATE INDEX slices_pool_idx ON slices (pool_id);
