-- 0019_node_degraded.sql — a node whose engine answers its health checks
-- but fails to create or start containers (gpucloud issue 12: a node kept
-- showing "up" while every container start failed, and the scheduler kept
-- placing work there).
--
-- * start_failures: consecutive launches on the node that failed with an
--   error of the engine's own (an HTTP 5xx answer to the network create,
--   container create or start; a 4xx is about what was asked: the image,
--   the command).  A successful start sets it back to 0.
-- * start_error: the engine's words of the last such failure.
-- * degraded_since: set when start_failures reaches the node_degrade_after
--   setting; the scheduler places nothing on a degraded node.  A health
--   check (GET /info) does not clear it: a successful start there or an
--   admin (POST /nodes/{id}/clear-degraded, or setting the node active)
--   does.

ALTER TABLE nodes
    ADD COLUMN start_failures integer NOT NULL DEFAULT 0 CHECK (start_failures >= 0),
    ADD COLUMN start_error    text NOT NULL DEFAULT '',
    ADD COLUMN degraded_since timestamptz;
