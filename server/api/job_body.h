/* job_body.h — what resources that submit jobs (POST /jobs, POST /sweeps)
 * share: the shape of a job submit body and its checks, so a run of a sweep
 * is exactly a job someone could have submitted.
 */
#ifndef GPUCLOUD_JOB_BODY_H
#define GPUCLOUD_JOB_BODY_H

#include <jansson.h>

#include "api/api.h"

/* The fields of a job submit body (an api_json_decode() spec). */
extern const struct jfield job_body_spec[];

/* Checks everything a submit body (already of job_body_spec's shape) says
 * beyond types: name, priority for the caller's role, ranges, command, tags,
 * env, hyperparameters.  Returns 0; or replies 4xx itself and returns -1
 * (the request is then finished). */
int job_body_check(struct http_req *r, json_t *body);

struct template_error;
/* A job submission from a template (the body of POST /jobs, or one run of
 * a sweep): fills body's image_id, pool, slices, CPU, memory, shm, maximum
 * runtime and (above 1) members the submission leaves out from tmpl
 * (API_JOB_TEMPLATE_JSON parsed), refuses ones that differ when the
 * template allows no overrides, and expands the template's command for
 * body's "hyperparameters" and "inputs" (home: "/home/<user>", for "~/").
 * On success body holds the expanded "command" and the completed
 * "hyperparameters", and *command_text and *hparams_text (caller frees)
 * are their JSON texts for the insert (reals written exactly); then
 * job_body_check() the body as any other.  Returns 0, or -1 with err
 * filled (err->field names the field at fault, err->reason its kind). */
int job_body_expand(json_t *body, const json_t *tmpl, const char *home, char **command_text,
                    char **hparams_text, struct template_error *err);

/* How a submit's insert (POST /jobs, POST /sweeps) came out.  The insert's
 * first four columns are: the new id (NULL when nothing was made), why no
 * quota admits it (or NULL), the id an earlier submit with the same
 * Idempotency-Key made (or NULL), and whether that earlier body was the
 * same ('t').  *tries counts the inserts run again after a concurrent submit
 * with the same key won.  what names the thing ("job", "sweep") in errors. */
enum submit_outcome {
	SUBMIT_REPLIED, /* an error was replied: nothing more to do */
	SUBMIT_AGAIN,   /* run the insert again (a concurrent submit won the key) */
	SUBMIT_REPLAY,  /* the key's earlier submit: reply with *id, 200 */
	SUBMIT_NEW,     /* made: audit, reply with *id, 201 */
};
enum submit_outcome job_body_submitted(struct http_req *r, PGresult *res, enum rc rc,
                                       const char *key, int *tries, const char *what,
                                       const char **id);

#endif
