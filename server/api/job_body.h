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

#endif
