/* jobfile.h — a job file (YAML or JSON) and the `submit` flags turned into
 * the body of POST /api/v1/jobs or POST /api/v1/sweeps.  Pure: no I/O, no
 * network; the one thing it cannot settle alone, an image named by its
 * reference, is left as "image" for the caller to resolve to image_id.
 */
#ifndef GPUCLOUD_CLI_JOBFILE_H
#define GPUCLOUD_CLI_JOBFILE_H

#include <stddef.h>

#include <jansson.h>

#define JOBFILE_MAX_DEPTH 32

struct jobfile_err {
	char msg[256];
};

/* Parses buf (JSON when its first non-blank byte is '{', else YAML: one
 * document, no aliases) into a JSON object in the job file's vocabulary.
 * Returns a new reference (caller decrefs) or NULL with err->msg set. */
json_t *jobfile_parse(const char *buf, size_t len, struct jobfile_err *err);

/* Types a command-line value the way a plain YAML scalar is typed: null,
 * true/false, an integer, a real, else the string.  Returns a new reference. */
json_t *jobfile_scalar(const char *s);

/* Converts a job file object (as jobfile_parse gives, or built from flags)
 * into a request body.  *is_sweep is set when it has a grid or a list (the
 * body is then a POST /sweeps body whose "job" is the run).  An image given
 * by name stays as the string "image" in the job; an image given as a
 * number becomes image_id.  Returns a new reference or NULL with err set. */
json_t *jobfile_request(json_t *doc, int *is_sweep, struct jobfile_err *err);

/* "1.5", "1500m" → 1500 CPU millis; -1 when it is not a CPU amount. */
long long jobfile_cpu_millis(const char *s);
/* "512M", "2Gi", "1.5G", a number (MiB) → MiB; -1 when not a size. */
long long jobfile_mib(const char *s);
/* "90", "90s", "30m", "2h", "1d", "1h30m" → seconds; -1 when not a duration. */
long long jobfile_seconds(const char *s);

#endif
