# gpucloud — build, run, test.
#
#   make run      install what is missing, build, start the platform (embedded default)
#   make demo     a demo on the platform `make run` started: simulated GPUs, a pool,
#                 a Jupyter image in a local registry, a teacher and students
#   make test     install what is missing, build, start the test world, run every test
#   make check    formatting, static analysis, banned calls
#   make fuzz     run each fuzz target for FUZZ_SECONDS (default 60)
#   make bench    run benchmarks (one: make bench NAME=http; medians of 3 runs: RUNS=3)
#   make world / make world-down   the test world on its own
#
# SANITIZER=address or SANITIZER=undefined builds with that sanitizer into
# build-<sanitizer>/; `make test SANITIZER=address` runs the suite on it.

CC      ?= cc
CLANG   ?= clang
SANITIZER ?=
# sanitizer builds live apart, so switching never mixes objects
ifeq ($(SANITIZER),)
BUILD   ?= build
else
BUILD   ?= build-$(SANITIZER)
endif

CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -I/usr/include/postgresql -Iserver
OPT     ?= -O2
CFLAGS  ?= $(OPT)
ifneq ($(SANITIZER),)
CFLAGS  += -fsanitize=$(SANITIZER) -fno-omit-frame-pointer
LDFLAGS += -fsanitize=$(SANITIZER)
endif
LIBS    = -levent -levent_openssl -levent_pthreads -lpq -ljansson -lssl -lcrypto \
          -lhttp_parser -lcurl -lz -lpthread

# One source list, folder by folder, lowest layer first (the folder rule:
# tests/lint/layers.sh, run by `make check`).
SRCS = $(addprefix server/base/,rc.c log.c config.c crypto.c worker.c csv.c clock.c cron.c \
         events.c jsonw.c) \
       $(addprefix server/net/,router.c http.c static.c ws.c) \
       $(addprefix server/db/,db.c notify.c leader.c) \
       $(addprefix server/engine/,docker.c nodes.c nvsmi.c images.c registry.c) \
       $(addprefix server/engine/,gpusample.c) \
       $(addprefix server/storage/,storage.c paths.c tar.c files.c quota.c areas.c) \
       $(addprefix server/auth/,auth.c) \
       $(addprefix server/sched/,place.c eta.c scheduler.c) \
       $(addprefix server/work/,workload.c spec.c passwd.c driver.c logscan.c template.c instances.c jobs.c \
         reconcile.c reclaim.c metricline.c jobmetrics.c ddp.c) \
       $(addprefix server/apps/,page.c activity.c forward.c route.c upstream.c tunnel.c \
         proxy.c terminal.c) \
       $(addprefix server/api/,api.c metrics.c api_health.c api_auth.c api_users.c \
         api_tokens.c api_audit.c api_nodes.c api_pools.c api_allocations.c \
         api_files.c api_uploads.c api_images.c api_registries.c api_routes.c \
         api_tensorboards.c api_instances.c api_settings.c admit.c job_body.c api_jobs.c \
         api_job_metrics.c api_sweeps.c api_job_templates.c jobcursor.c \
         api_classes.c api_class_sessions.c api_assignments.c api_class_ops.c \
         account_import.c) \
       $(addprefix server/api/,api_usage.c) \
       $(addprefix server/api/,api_notifications.c) \
       $(addprefix server/work/,mailer.c)
MAIN = server/main.c
# The `gpucloud` command-line client: its own folder, its own link line
# (it talks to gpucloudd over HTTP only and links nothing of the server).
CLI_SRCS = $(addprefix server/cli/,gpucloud.c client.c jobfile.c cp.c)
CLI_LIBS = -lcurl -ljansson -lyaml -lcrypto

OBJS      = $(SRCS:server/%.c=$(BUILD)/obj/%.o)
MAIN_OBJ  = $(BUILD)/obj/main.o
CLI_OBJS  = $(CLI_SRCS:server/%.c=$(BUILD)/obj/%.o)
LIB       = $(BUILD)/libgpucloud.a
UNIT_SRCS = $(wildcard tests/unit/*/test_*.c)
UNIT_BINS = $(addprefix $(BUILD)/,$(notdir $(UNIT_SRCS:.c=)))
FUZZ_SRCS = $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS = $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_LIB  = $(BUILD)/fuzz/libgpucloud.a
FUZZ_OBJS = $(SRCS:server/%.c=$(BUILD)/fuzz/obj/%.o)
FUZZ_SECONDS ?= 60

.PHONY: all deps run demo demo-down test test-build test-in-world unit fuzz-replay integration e2e \
        check fuzz bench world world-down world-check clean

all: $(BUILD)/gpucloudd $(BUILD)/gpucloud

$(BUILD)/obj/%.o: server/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/gpucloudd: $(MAIN_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(MAIN_OBJ) $(LIB) $(LIBS)

$(BUILD)/gpucloud: $(CLI_OBJS)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJS) $(CLI_LIBS)

# Unit tests #include the .c under test and take the rest from the archive.
# tests/unit/<folder>/test_x.c mirrors server/<folder>/x.c.
vpath test_%.c $(sort $(dir $(UNIT_SRCS)))
$(BUILD)/test_%: test_%.c $(LIB) tests/unit/harness.h
	$(CC) $(CFLAGS_BASE) -Itests/unit $(CFLAGS) -MMD -MP $(LDFLAGS) -o $@ $< $(LIB) $(LIBS)

# Fuzz targets: clang, libFuzzer, ASan+UBSan, over the same sources.
$(BUILD)/fuzz/obj/%.o: server/%.c
	@mkdir -p $(dir $@)
	$(CLANG) $(CFLAGS_BASE) -O1 -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c $< -o $@

$(FUZZ_LIB): $(FUZZ_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB)
	$(CLANG) $(CFLAGS_BASE) -O1 -fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_LIB) $(LIBS)

# the job file's test and fuzz target #include server/cli/jobfile.c, which
# reads YAML (and is in no archive)
$(BUILD)/fuzz/fuzz_jobfile $(BUILD)/test_jobfile: LIBS += -lyaml
$(BUILD)/fuzz/fuzz_jobfile $(BUILD)/test_jobfile: server/cli/jobfile.c server/cli/jobfile.h

deps:
	@bash deploy/deps.sh

run: deps
	@$(MAKE) --no-print-directory all
	@bash deploy/run.sh

# Needs `make run` answering (another terminal); idempotent.
demo: deps
	@bash deploy/demo.sh up

demo-down:
	@bash deploy/demo.sh down

test-build: all $(UNIT_BINS) $(FUZZ_BINS)

# The whole suite: dependencies, build, the world up, every test, the world down.
test: deps
	@$(MAKE) --no-print-directory -j$$(nproc) test-build
	@bash deploy/with-world.sh $(MAKE) --no-print-directory test-in-world

test-in-world: unit fuzz-replay integration e2e

# test_db restarts the world's PostgreSQL to check the pool reconnects.
unit: $(UNIT_BINS)
	@set -e; : $${GPUCLOUD_TEST_PG_RESTART_CMD:="runuser -u postgres -- $$PG_BIN/pg_ctl -D $$GPUCLOUD_TEST_PG_DATA -m fast -w restart"}; \
	export GPUCLOUD_TEST_PG_RESTART_CMD; \
	for t in $(UNIT_BINS); do echo "== $$t"; $$t; done

# Replays each committed corpus through its target (no new fuzzing).
fuzz-replay: $(FUZZ_BINS)
	@set -e; for f in $(FUZZ_BINS); do n=$${f##*/fuzz_}; \
	  echo "== $$f (corpus tests/fuzz/corpus/$$n)"; \
	  $$f tests/fuzz/corpus/$$n/* > $(BUILD)/fuzz/$$n.log 2>&1 || { tail -n 40 $(BUILD)/fuzz/$$n.log; exit 1; }; \
	  echo "   $$(grep -c '^Executed' $(BUILD)/fuzz/$$n.log) inputs replayed, no crash"; \
	done

integration: all
	@ulimit -n 65536 2>/dev/null || true; GPUCLOUD_BIN=$(abspath $(BUILD))/gpucloudd \
	  node --test --test-concurrency=1 tests/integration/

e2e: all
	@GPUCLOUD_BIN=$(abspath $(BUILD))/gpucloudd node --test --test-concurrency=1 tests/e2e/

fuzz: $(FUZZ_BINS)
	@set -e; for f in $(FUZZ_BINS); do n=$${f##*/fuzz_}; \
	  mkdir -p $(BUILD)/fuzz/corpus-$$n; \
	  $$f -max_total_time=$(FUZZ_SECONDS) $(BUILD)/fuzz/corpus-$$n tests/fuzz/corpus/$$n; \
	done

bench: deps
	@$(MAKE) --no-print-directory all
	@BENCH_RUNS=$(or $(RUNS),1) bash deploy/with-world.sh bash tests/bench/run.sh $(NAME)

world:
	@bash deploy/world.sh up

world-down:
	@bash deploy/world.sh down

world-check:
	@bash tests/world_smoke.sh

BANNED = '\b(sprintf|vsprintf|strcpy|strcat|atoi|atol|strtok|gets|system)[[:space:]]*\('
check:
	@echo "== folder rule"; bash tests/lint/layers.sh
	@echo "== banned calls"; ! grep -rnE $(BANNED) --include='*.[ch]' server tests/unit tests/fuzz
	@echo "== clang-format"; clang-format --dry-run --Werror $(shell find server -name '*.[ch]')
	@echo "== cppcheck"; cppcheck --quiet --error-exitcode=1 --enable=warning,portability \
	  --std=c11 -D_GNU_SOURCE --suppress=missingIncludeSystem --include=/usr/include/jansson.h \
	  -I server server/

clean:
	rm -rf $(BUILD)

-include $(OBJS:.o=.d) $(MAIN_OBJ:.o=.d) $(CLI_OBJS:.o=.d) $(UNIT_BINS:=.d) $(FUZZ_OBJS:.o=.d)
