/* template.h — job templates: checking a template and expanding its command
 * pattern for one set of hyperparameters.  Pure (jansson values in, jansson
 * values out, no I/O), so the submit path and a sweep call the same code for
 * each run.  The placeholders and the schema are described in
 * db/migrations/0023_job_templates.sql.
 */
#ifndef GPUCLOUD_WORK_TEMPLATE_H
#define GPUCLOUD_WORK_TEMPLATE_H

#include <stddef.h>

#include <jansson.h>

#define TEMPLATE_MAX_HPARAMS 64
#define TEMPLATE_MAX_INPUTS  16

/* Why a check failed, for a person and for a form: field names what is
 * wrong ("hyperparameters.lr", "inputs.script", "command[2]",
 * "schema[1].max"); reason is a short code a page can translate (type, min,
 * max, choice, unknown, required, pattern, schema); msg the English
 * sentence, naming the field; limit the bound that was passed (min, max) or
 * NULL; all "" when nothing failed. */
struct template_error {
	char field[96];
	char reason[16];
	char msg[400];
	double limit;
	int has_limit;
};

/* What a template says (borrowed). */
struct template_def {
	const json_t *pattern; /* array of strings with placeholders */
	const json_t *schema;  /* array of hyperparameter specs */
	const json_t *inputs;  /* array of input declarations (NULL: none) */
};

/* Checks a template as an admin writes it: the schema (names, types,
 * defaults within min/max/choices), the inputs, and the pattern (every
 * placeholder known, {hyperparameters} a whole element, braces balanced).
 * Returns 0, or -1 with err filled. */
int template_check(const struct template_def *t, struct template_error *err);

/* Expands t for the user's hyperparameters (object or NULL) and input
 * values (object or NULL); home ("/home/alice") replaces a leading "~/" of
 * an input.  On success returns 0 with *command (array of strings) and
 * *completed (every schema hyperparameter, defaults filled, schema order):
 * new references the caller releases.  On failure returns -1 with err
 * filled (wrong type, out of range, not a choice, unknown name, a missing
 * required value) and both NULL.  t is assumed to pass template_check(). */
int template_expand(const struct template_def *t, const json_t *hparams, const json_t *values,
                    const char *home, json_t **command, json_t **completed,
                    struct template_error *err);

/* v as the shortest text that reads back as the same double ("0.1", not
 * "0.10000000000000001"); "1e-06" style for small and large ones.  Returns
 * the length written (always < len, len >= 32). */
int template_format_real(double v, char *buf, size_t len);

/* obj (a flat object of numbers, strings, booleans) as compact JSON text
 * with reals in template_format_real()'s form, keys in obj's order.  Caller
 * frees; NULL when out of memory. */
char *template_dump_flat(const json_t *obj);

/* Adds GPUCLOUD_HP_<NAME> to env for each hyperparameter of hp (a job's
 * hyperparameters object): the name upper-cased with every character other
 * than a letter or digit made '_' ("batch-size" is GPUCLOUD_HP_BATCH_SIZE),
 * the value as the command line has it (true/false, 0.1, text). */
void template_env(const json_t *hp, json_t *env);

#endif
