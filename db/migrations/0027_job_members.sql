-- 0027_job_members.sql — distributed jobs: one container (a "member") per
-- node, all placed at once.
--
-- jobs.members is N (1..16).  A job with N > 1 asks the scheduler for a
-- gang (alloc_requests.nodes = N: N distinct nodes × jobs.slices each, all
-- or nothing; cpu_millis/mem_mib are per member), so two members never
-- share a node: more GPUs on one node is more slices per member.  Each
-- member has a row here from the submit on; rank r runs on the r-th node
-- of the allocation (by its first allocation), and its log is
-- output.log (rank 0) or output.rank<r>.log in the job directory.
-- A job with N = 1 has no rows here: jobs.node_id/container_* say it all.
--
-- Member states: queued → starting → running → succeeded | failed |
-- stopped (stopped on purpose: a peer failed, a cancel, the runtime limit)
-- | lost (its container vanished or its node's engine went away).  The job
-- is running when all members run, succeeded when all exit 0, and ends
-- with the first failing member's reason (naming its rank) once every
-- member is over (work/jobs.c).

ALTER TABLE jobs ADD COLUMN members integer NOT NULL DEFAULT 1 CHECK (members BETWEEN 1 AND 16);
-- a distributed job's /27 on the nodes' distributed-job network (work/ddp.h):
-- taken at its first launch (the lowest free one), given back once it ended
ALTER TABLE jobs ADD COLUMN ddp_slot integer CHECK (ddp_slot BETWEEN 0 AND 255);
CREATE UNIQUE INDEX jobs_ddp_slot_idx ON jobs (ddp_slot);

CREATE TABLE job_members (
    job_id         bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    rank           integer NOT NULL CHECK (rank BETWEEN 0 AND 15),
    node_id        bigint REFERENCES nodes (id) ON DELETE SET NULL,
    container_name text NOT NULL DEFAULT '',
    container_id   text,
    -- the member's address on the job's network (MASTER_ADDR for rank 0)
    address        text NOT NULL DEFAULT '',
    state          text NOT NULL DEFAULT 'queued'
                   CHECK (state IN ('queued', 'starting', 'running', 'succeeded', 'failed',
                                    'stopped', 'lost')),
    exit_code      integer,
    reason         text NOT NULL DEFAULT '',
    reason_code    text NOT NULL DEFAULT '',
    started_at     timestamptz,
    finished_at    timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, rank)
);
-- the reconciler: which live members are on a node
CREATE INDEX job_members_node_idx ON job_members (node_id)
    WHERE state IN ('starting', 'running');
