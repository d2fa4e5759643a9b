/* api_jobs.h — what other resources that submit jobs (sweeps) share with
 * POST /jobs: the shape of a submit body and its checks, so a run of a
 * sweep is exactly a job someone could have submitted.
 */
#ifndef GPUCLOUD_API_JOBS_H
#define GPUCLOUD_API_JOBS_H

#include <jansson.h>

#include "api/api.h"

/* The fields of a POST /jobs body (api_json_decode() spec). */
extern const struct jfield api_jobs_spec[];

/* Checks everything a submit body (already of api_jobs_spec's shape) says
 * beyond types: names, ranges, priority for the caller's role, command,
 * env, hyperparameters.  Returns 0; or replies 4xx itself and returns -1
 * (the request is then finished). */
int api_jobs_check(struct http_req *r, json_t *body);

#endif
