-- 0007_images.sql — registries (with sealed credentials), the image catalog
-- and where each image is pulled; the CUDA versions placement compares.
--
-- CUDA versions are integers major*1000 + minor*10 (CUDA 12.4 = 12040), the
-- encoding of the driver API (cudaDriverGetVersion), so they compare as
-- numbers.

CREATE TABLE registries (
    id            bigserial PRIMARY KEY,
    name          text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    server        text NOT NULL CHECK (server <> '' AND length(server) <= 255),
    username      text NOT NULL DEFAULT '',
    secret_sealed text,                   -- password/API key, AES-256-GCM under the master key
    personal      boolean NOT NULL DEFAULT false, -- where "save as image" pushes
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
-- at most one personal registry
CREATE UNIQUE INDEX registries_personal_idx ON registries (personal) WHERE personal;

CREATE TYPE image_visibility AS ENUM ('everyone', 'restricted');

CREATE TABLE images (
    id            bigserial PRIMARY KEY,
    reference     text NOT NULL UNIQUE CHECK (reference <> '' AND length(reference) <= 512),
    registry_id   bigint REFERENCES registries (id) ON DELETE RESTRICT,
    display_name  text NOT NULL DEFAULT '',
    framework     text NOT NULL DEFAULT '',
    cuda_version  text NOT NULL DEFAULT '',   -- '' = unknown; "12.6"
    cuda_min      integer NOT NULL DEFAULT 0 CHECK (cuda_min >= 0), -- same, encoded
    cuda_source   text NOT NULL DEFAULT '' CHECK (cuda_source IN ('', 'admin', 'image')),
    description   text NOT NULL DEFAULT '',
    default_cmd   jsonb CHECK (default_cmd IS NULL OR jsonb_typeof(default_cmd) = 'array'),
    app_ports     jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(app_ports) = 'array'),
    owner_id      bigint REFERENCES users (id) ON DELETE CASCADE, -- NULL = catalog
    -- everyone, or only the roles/classes/groups listed (any match)
    visibility    image_visibility NOT NULL DEFAULT 'everyone',
    vis_roles     user_role[] NOT NULL DEFAULT '{}',
    vis_classes   bigint[] NOT NULL DEFAULT '{}',
    vis_groups    bigint[] NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX images_owner_idx ON images (owner_id) WHERE owner_id IS NOT NULL;

CREATE TABLE image_nodes (
    image_id   bigint NOT NULL REFERENCES images (id) ON DELETE CASCADE,
    node_id    bigint NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    state      text NOT NULL DEFAULT 'absent' CHECK (state IN ('absent', 'pulling', 'present', 'failed')),
    progress   integer NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
    error      text NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (image_id, node_id)
);
CREATE INDEX image_nodes_node_idx ON image_nodes (node_id);

-- the newest CUDA the node's driver supports; NULL = unknown (not limited)
ALTER TABLE nodes ADD COLUMN cuda_max integer CHECK (cuda_max IS NULL OR cuda_max > 0);
-- the CUDA a request's image needs; 0 = none
ALTER TABLE alloc_requests ADD COLUMN cuda_min integer NOT NULL DEFAULT 0 CHECK (cuda_min >= 0);
