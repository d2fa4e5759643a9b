#!/usr/bin/env bash
# layers.sh — the folder rule of server/: a file may include only headers of
# its own folder and of the folders its layer stands on.  `make check` runs it;
# it prints every #include that breaks the rule and exits 1 if there is one.
#
#   folder    may include (besides itself)
#   base      -
#   net       base
#   db        base
#   engine    base db
#   storage   base db            (worker-side code: neither db nor libevent)
#   auth      base net db
#   sched     base db
#   work      base db engine storage
#   apps      base net db engine auth
#   api       everything below; of api/ only the shared helpers api.h,
#             metrics.h, admit.h, job_body.h, jobcursor.h (pure) and
#             account_import.h, never
#             another resource's file
#   main.c    everything
#   cli       base             (the `gpucloud` client: a top layer of its own that
#                              talks to gpucloudd over HTTP; nothing else of the server)
set -euo pipefail
cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../../server"

declare -A ALLOW=(
	[base]="base"
	[net]="base net"
	[db]="base db"
	[engine]="base db engine"
	[storage]="base db storage"
	[auth]="base net db auth"
	[sched]="base db sched"
	[work]="base db engine storage work"
	[apps]="base net db engine auth apps"
	[api]="base net db engine storage auth sched work apps api"
	[cli]="base cli"
)
API_SHARED="api/api.h api/metrics.h api/admit.h api/job_body.h api/jobcursor.h api/account_import.h"

bad=0
for dir in */; do
	folder=${dir%/}
	if [[ -z ${ALLOW[$folder]+x} ]]; then
		printf 'server/%s: a folder the layer table does not know (tests/lint/layers.sh)\n' "$folder"
		bad=1
		continue
	fi
	for f in "$folder"/*.[ch]; do
		[[ -e $f ]] || continue
		while IFS=: read -r line inc; do
			inc=${inc#*\"}
			inc=${inc%\"*}
			if [[ $inc != */* ]]; then
				printf 'server/%s:%s: include "%s" without its folder\n' "$f" "$line" "$inc"
				bad=1
				continue
			fi
			to=${inc%%/*}
			ok=0
			for a in ${ALLOW[$folder]}; do [[ $a == "$to" ]] && ok=1; done
			if [[ $ok == 1 && $folder == api && $to == api && $inc != "${f%.c}.h" ]]; then
				[[ " $API_SHARED " == *" $inc "* ]] || ok=0
			fi
			if [[ $ok == 0 ]]; then
				printf 'server/%s:%s: %s/ may not include "%s" (allowed: %s)\n' \
					"$f" "$line" "$folder" "$inc" "${ALLOW[$folder]}"
				bad=1
			fi
		done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
	done
done
if [[ $bad == 0 ]]; then
	echo "layers: every include follows the folder rule"
fi
exit "$bad"
