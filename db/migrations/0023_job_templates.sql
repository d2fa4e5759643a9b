-- 0023_job_templates.sql — job templates: a command pattern with
-- placeholders, a typed hyperparameter schema and default resources that an
-- admin curates, so a user submits "PyTorch, lr 0.003, 5 epochs" instead of
-- writing a command line.  The expansion (work/template.c) is pure: the API
-- checks the user's hyperparameters against the schema and records the
-- expanded command on the job, so a job never depends on a template that
-- was edited or removed later (jobs.template_id is for display only).
--
-- command: text[] with placeholders — {hyperparameters} (a whole element:
-- "--name value" pairs in schema order; a bool true is "--name", false is
-- left out), {hp.NAME} (one value inside an element), {INPUT} (a declared
-- input such as {script}), {{ and }} (literal braces).
-- inputs: ordered [{name, help, default, required}] (strings the user gives,
-- a leading "~/" is their home).
-- hyperparameters: ordered [{name, type: int|float|string|bool|choice,
-- default, min, max, choices, help}].
-- image_id NULL: the user picks a catalog image.  pool NULL: the user picks
-- one or none; slices are the default when a pool is picked.  members is
-- for distributed jobs (containers per job).  allow_overrides: the user may
-- change the image and resources; otherwise the template's are used.

CREATE TABLE job_templates (
    id               bigserial PRIMARY KEY,
    name             text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    title            text NOT NULL CHECK (title <> '' AND length(title) <= 120),
    description      text NOT NULL DEFAULT '' CHECK (length(description) <= 2000),
    kind             text NOT NULL DEFAULT 'script'
                     CHECK (kind IN ('pytorch', 'pytorch-ddp', 'script')),
    image_id         bigint REFERENCES images (id) ON DELETE SET NULL,
    command          text[] NOT NULL CHECK (cardinality(command) BETWEEN 1 AND 256),
    inputs           jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(inputs) = 'array'),
    hyperparameters  jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(hyperparameters) = 'array'),
    pool             text,
    slices           integer NOT NULL DEFAULT 1 CHECK (slices BETWEEN 0 AND 64),
    cpu_millis       bigint NOT NULL DEFAULT 1000 CHECK (cpu_millis BETWEEN 10 AND 1024000),
    mem_mib          bigint NOT NULL DEFAULT 1024 CHECK (mem_mib BETWEEN 16 AND 16777216),
    shm_mib          bigint NOT NULL DEFAULT 64 CHECK (shm_mib BETWEEN 1 AND 1048576),
    max_runtime_s    integer NOT NULL DEFAULT 86400 CHECK (max_runtime_s BETWEEN 1 AND 2592000),
    members          integer NOT NULL DEFAULT 1 CHECK (members BETWEEN 1 AND 16),
    allow_overrides  boolean NOT NULL DEFAULT true,
    enabled          boolean NOT NULL DEFAULT true,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE jobs ADD COLUMN template_id bigint REFERENCES job_templates (id) ON DELETE SET NULL;
CREATE INDEX jobs_template_idx ON jobs (template_id) WHERE template_id IS NOT NULL;

-- The shipped templates.  deploy/examples/jobs/train.py takes exactly the
-- PyTorch schema's flags.
INSERT INTO job_templates (name, title, description, kind, command, inputs, hyperparameters,
                           slices, cpu_millis, mem_mib, shm_mib, max_runtime_s, members)
VALUES
('pytorch', 'PyTorch (single node)',
 'Runs a PyTorch training script with the hyperparameters as --name value flags. '
 'Upload your script (or deploy/examples/jobs/train.py) to your home first.',
 'pytorch', ARRAY['python3', '{script}', '{hyperparameters}'],
 '[{"name": "script", "help": "the training script; ~/ is your home", "default": "~/train.py", "required": true}]',
 '[{"name": "lr", "type": "float", "default": 0.01, "min": 0.000001, "max": 10, "help": "learning rate"},
   {"name": "epochs", "type": "int", "default": 3, "min": 1, "max": 1000, "help": "passes over the data"},
   {"name": "batch-size", "type": "int", "default": 32, "min": 1, "max": 65536, "help": "samples per step"},
   {"name": "hidden", "type": "int", "default": 64, "min": 1, "max": 65536, "help": "hidden layer width"},
   {"name": "optimizer", "type": "choice", "default": "adam", "choices": ["adam", "sgd"], "help": "the optimizer"},
   {"name": "seed", "type": "int", "default": 0, "min": 0, "max": 2147483647, "help": "random seed"},
   {"name": "verbose", "type": "bool", "default": false, "help": "print every step"},
   {"name": "step-delay", "type": "float", "default": 0, "min": 0, "max": 10, "help": "seconds to wait after each step (to watch a run live)"}]',
 1, 2000, 4096, 1024, 3600, 1),
('pytorch-ddp', 'PyTorch distributed (DDP)',
 'Several containers (members, one per node) train together with '
 'DistributedDataParallel; each gets MASTER_ADDR, RANK and WORLD_SIZE. '
 'Upload your script (or deploy/examples/jobs/ddp.py, which reads these '
 'hyperparameters from GPUCLOUD_HPARAMS_JSON) to your home first.',
 'pytorch-ddp', ARRAY['python3', '{script}', '{hyperparameters}'],
 '[{"name": "script", "help": "the training script; ~/ is your home", "default": "~/ddp.py", "required": true}]',
 '[{"name": "steps", "type": "int", "default": 20, "min": 1, "max": 100000, "help": "training steps"},
   {"name": "lr", "type": "float", "default": 0.05, "min": 0.000001, "max": 10, "help": "learning rate"},
   {"name": "batch", "type": "int", "default": 64, "min": 1, "max": 65536, "help": "samples per step and member"}]',
 1, 2000, 4096, 1024, 3600, 2),
('script', 'Shell script',
 'Runs shell commands (sh -c) in the job''s directory; hyperparameters arrive as '
 'GPUCLOUD_HP_<NAME> variables and hyperparameters.json.',
 'script', ARRAY['sh', '-c', '{script}'],
 '[{"name": "script", "help": "shell commands", "default": "echo hello from $GPUCLOUD_JOB_ID", "required": true}]',
 '[]',
 1, 1000, 1024, 64, 3600, 1);
