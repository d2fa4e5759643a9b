/* test_api.c — strict JSON body decoding, static path safety, gzip
 * negotiation, the error-code table, and the pieces handlers build their
 * statements from: db_args, named columns, DB_TS. */
#include "api/api.c"
#include "net/static.c"
#include "harness.h"

static const struct jfield spec[] = {
	{ "name", J_STRING, 1, 8 },  { "n", J_INT, 0, 0 },    { "ok", J_BOOL, 0, 0 },
	{ "tags", J_STRINGS, 0, 2 }, { "o", J_OBJECT, 0, 0 }, { NULL, 0, 0, 0 },
};

static int rejects(const char *s, const char *needle)
{
	char err[256] = "";
	json_t *j = api_json_decode(s, strlen(s), spec, err, sizeof(err));

	if (j) {
		json_decref(j);
		fprintf(stderr, "accepted: %s\n", s);
		return 0;
	}
	if (needle && !strstr(err, needle)) {
		fprintf(stderr, "message '%s' lacks '%s'\n", err, needle);
		return 0;
	}
	return 1;
}

TEST(json_accepts)
{
	char err[256];
	const char *s = "{\"name\":\"ab\",\"n\":3,\"ok\":true,\"tags\":[\"x\"],\"o\":{}}";
	json_t *j = api_json_decode(s, strlen(s), spec, err, sizeof(err));

	CHECK(j != NULL);
	json_decref(j);
	j = api_json_decode("{\"name\":\"ab\",\"n\":null}", 22, spec, err, sizeof(err));
	CHECK(j != NULL); /* null for an optional field */
	json_decref(j);
}

TEST(json_rejects)
{
	CHECK(rejects("", "missing field 'name'"));
	CHECK(rejects("{", "malformed JSON"));
	CHECK(rejects("[]", "must be a JSON object"));
	CHECK(rejects("\"x\"", "must be a JSON object"));
	CHECK(rejects("{\"name\":1}", "must be a string"));
	CHECK(rejects("{\"name\":\"a\",\"n\":\"3\"}", "must be an integer"));
	CHECK(rejects("{\"name\":\"a\",\"n\":1.5}", "must be an integer"));
	CHECK(rejects("{\"name\":\"a\",\"ok\":1}", "must be a boolean"));
	CHECK(rejects("{\"name\":\"a\",\"tags\":[1]}", "array of short strings"));
	CHECK(rejects("{\"name\":\"a\",\"tags\":[\"a\",\"b\",\"c\"]}", "more than 2"));
	CHECK(rejects("{\"name\":\"a\",\"o\":[]}", "must be an object"));
	CHECK(rejects("{\"name\":\"123456789\"}", "longer than 8"));
	CHECK(rejects("{\"name\":\"a\",\"extra\":1}", "unknown field 'extra'"));
	CHECK(rejects("{\"name\":\"a\",\"name\":\"b\"}", NULL));
	CHECK(rejects("{\"name\":\"a\\u0000b\"}", NULL));
	CHECK(rejects("{\"name\":null}", NULL));
	CHECK(rejects("{\"name\":\"\xff\"}", "malformed JSON"));
	CHECK(rejects("{\"name\":\"\xc0\xae\"}", "malformed JSON")); /* overlong UTF-8 */
	CHECK(rejects("{\"name\":\"a\"} x", "malformed JSON"));
}

TEST(static_paths)
{
	CHECK(static_path_ok("index.html"));
	CHECK(static_path_ok("js/app.js"));
	CHECK(!static_path_ok(""));
	CHECK(!static_path_ok("/etc/passwd"));
	CHECK(!static_path_ok("../x"));
	CHECK(!static_path_ok("a/../x"));
	CHECK(!static_path_ok("a/./x"));
	CHECK(!static_path_ok(".git/config"));
	CHECK(!static_path_ok("a//b"));
	CHECK(!static_path_ok("a\\..\\b"));
	CHECK(!static_path_ok("a/\x01"));
	CHECK(!static_path_ok("a/"));
}

TEST(gzip_negotiation)
{
	CHECK(accepts_gzip("gzip"));
	CHECK(accepts_gzip("deflate, gzip;q=0.5"));
	CHECK(accepts_gzip("br, *"));
	CHECK(!accepts_gzip("gzip;q=0"));
	CHECK(!accepts_gzip("gzip;q=0.000"));
	CHECK(!accepts_gzip("identity"));
	CHECK(!accepts_gzip("gzipx"));
	CHECK(!accepts_gzip(""));
}

TEST(gzip_roundtrip)
{
	char in[4096], *out = NULL, back[4096];
	size_t outlen = 0;
	z_stream z;

	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (char)('a' + i % 7);
	CHECK(gzip(in, sizeof(in), &out, &outlen) == 0);
	CHECK(outlen > 0 && outlen < sizeof(in));
	memset(&z, 0, sizeof(z));
	inflateInit2(&z, 15 + 16);
	z.next_in = (Bytef *)out;
	z.avail_in = (uInt)outlen;
	z.next_out = (Bytef *)back;
	z.avail_out = sizeof(back);
	CHECK(inflate(&z, Z_FINISH) == Z_STREAM_END);
	CHECK(z.total_out == sizeof(in) && memcmp(in, back, sizeof(in)) == 0);
	inflateEnd(&z);
	free(out);
}

TEST(rc_table)
{
	CHECK(rc_http_status(RC_INVALID) == 400);
	CHECK(rc_http_status(RC_UNAUTHORIZED) == 401);
	CHECK(rc_http_status(RC_FORBIDDEN) == 403);
	CHECK(rc_http_status(RC_HEADERS) == 431);
	CHECK(rc_http_status(RC_UNAVAILABLE) == 503);
	CHECK(rc_http_status((enum rc)999) == 500);
	for (int i = 0; i < RC__COUNT; i++)
		CHECK(rc_code((enum rc)i) != NULL && rc_http_status((enum rc)i) >= 200);
}

/* Parameters come out in order, integers as PostgreSQL reads them, NULL as
 * SQL NULL, and a string is borrowed, not copied. */
TEST(db_args_in_order)
{
	struct db_args a = DB_ARGS_INIT;
	const char *name = "node1";

	db_arg_ll(&a, 42);
	db_arg_str(&a, name);
	db_arg_ll(&a, -9223372036854775807LL - 1);
	db_arg_ll_opt(&a, 7, 0);
	db_arg_ll_opt(&a, 0, 1);
	db_arg_null(&a);
	CHECK(a.n == 6);
	CHECK_STR(a.v[0], "42");
	CHECK(a.v[1] == name);
	CHECK_STR(a.v[2], "-9223372036854775808");
	CHECK(a.v[3] == NULL);
	CHECK_STR(a.v[4], "0");
	CHECK(a.v[5] == NULL);
}

TEST(db_args_fill_to_capacity)
{
	struct db_args a = DB_ARGS_INIT;

	for (int i = 0; i < DB_ARGS_MAX; i++)
		db_arg_ll(&a, i);
	CHECK(a.n == DB_ARGS_MAX);
	for (int i = 0; i < DB_ARGS_MAX; i++)
		CHECK(strtol(a.v[i], NULL, 10) == i);
}

#define T_COLS(FIRST, COL) FIRST(T_ID, "t.id") COL(T_NAME, "t.name") COL(T_AT, DB_TS("t.at"))
enum t_col { DB_COLS_ENUM(T_COLS) T_NCOLS };

TEST(named_columns)
{
	CHECK(T_ID == 0 && T_NAME == 1 && T_AT == 2 && T_NCOLS == 3);
	CHECK_STR("SELECT " DB_COLS_SQL(T_COLS) " FROM t",
	          "SELECT t.id, t.name, to_char((t.at) AT TIME ZONE 'UTC',"
	          " 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM t");
	CHECK(USER_CREATED_AT == 6 && USER_MUST_CHANGE == 7 && USER_DELETED_AT == 8 &&
	      API_USER_NCOLS == 9);
}

int main(void)
{
	RUN(json_accepts);
	RUN(json_rejects);
	RUN(static_paths);
	RUN(gzip_negotiation);
	RUN(gzip_roundtrip);
	RUN(rc_table);
	RUN(db_args_in_order);
	RUN(db_args_fill_to_capacity);
	RUN(named_columns);
	return harness_done("test_api");
}
