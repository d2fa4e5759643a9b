-- 0011_node_cuda.sql — where a node's CUDA version (nodes.cuda_max, 0007)
-- comes from: GPU discovery reads it from nvidia-smi's "CUDA Version"
-- header; an admin may set it instead, and discovery then leaves it alone.

-- what the last discovery read (encoded as cuda_max); NULL = never read.
-- Kept apart from cuda_max so that clearing the admin's value falls back to
-- it at once, without waiting for the next discovery.
ALTER TABLE nodes ADD COLUMN cuda_discovered integer
    CHECK (cuda_discovered IS NULL OR cuda_discovered > 0);
-- '' = unknown, 'admin' = set through the API, 'discovered' = from nvidia-smi
ALTER TABLE nodes ADD COLUMN cuda_source text NOT NULL DEFAULT ''
    CHECK (cuda_source IN ('', 'admin', 'discovered'));
-- nodes whose cuda_max was set before this migration were set by an admin
UPDATE nodes SET cuda_source = 'admin' WHERE cuda_max IS NOT NULL;
