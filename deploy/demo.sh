#!/usr/bin/env bash
# demo.sh [up|down|registry] — `make demo`: a demonstration set-up on the
# platform that `make run` started, so that a newcomer sees the product work
# on any machine, without GPUs or internet. `up` (the default), through the
# HTTP API as the admin:
#   * declares 4 simulated GPUs on node `local` (the engine `make run`
#     registered), as device files under var/run/demo/gpus (NVIDIA's major
#     195: they cannot be opened, but containers get them like real ones);
#   * starts a registry of its own on 127.0.0.1:5056 (htpasswd user `demo`,
#     data under var/run/demo/registry) and pushes to it the test world's
#     Jupyter image, built here from the same recipe (deploy/images.sh: Debian
#     bookworm's python3-notebook, debootstrapped once and cached in var/cache);
#   * adds the registry `demo`, the catalog image "Jupyter Notebook (demo)"
#     (app port jupyter:8888), the pool `demo` over the simulated GPUs, and
#     the accounts demo-teacher and demo-student1..3 with quotas on the pool;
#   * prints the accounts and saves them in var/run/state/demo-accounts (0600).
# Everything it makes says "demo". It is idempotent: what exists is left as
# it is, so a second run changes nothing. `down` stops the demo's registry
# (`make run`'s Ctrl-C stops it too; `up` starts it again); `registry` only
# starts it. Needs root (device files) and a gpucloudd that answers.
#
# Environment:
#   GPUCLOUD_DEMO_URL            the server (default http://127.0.0.1:$GPUCLOUD_PORT,
#                                port 8080)
#   GPUCLOUD_ADMIN_PASSWORD      the admin's password (default: read from
#                                $GPUCLOUD_STATE_DIR/admin-password)
#   GPUCLOUD_STATE_DIR           `make run`'s state folder (var/run/state)
#   GPUCLOUD_DEMO_DIR            the demo's own folder (var/run/demo)
#   GPUCLOUD_DEMO_REGISTRY_PORT  its registry's port on 127.0.0.1 (5056)
#   GPUCLOUD_DEMO_IMAGE_FROM     push this image (present on the engine, or
#                                pullable) instead of building the recipe
#   GPUCLOUD_WORLD_CACHE         the debootstrap cache folder (var/cache)
# shellcheck disable=SC2016 # jq programs and the container's command name $variables literally
set -euo pipefail

PROG=demo
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=deploy/lib.sh
. "$ROOT/deploy/lib.sh"

R=$ROOT/var/run
D=${GPUCLOUD_DEMO_DIR:-$R/demo}
STATE=${GPUCLOUD_STATE_DIR:-$R/state}
API=${GPUCLOUD_DEMO_URL:-http://127.0.0.1:${GPUCLOUD_PORT:-8080}}
API=${API%/}
ACCOUNTS=$STATE/demo-accounts
POOL=demo
GPUS=4
GPU_MODEL='Simulated GPU (demo)'
GPU_MEMORY_MIB=16384
TEACHER=demo-teacher
STUDENTS=(demo-student1 demo-student2 demo-student3)
# Jupyter takes the proxy's per-instance token (README, Apps) and opens in the home folder.
JUPYTER_CMD='["sh","-c","exec python3 -m notebook --ip=0.0.0.0 --port=8888 --no-browser --NotebookApp.token=\"$GPUCLOUD_APP_TOKEN\" --NotebookApp.password= --NotebookApp.base_url=/ --notebook-dir=\"$HOME\""]'

# What deploy/images.sh needs (see its header).
REG_ADDR=127.0.0.1:${GPUCLOUD_DEMO_REGISTRY_PORT:-5056}
if [[ -z ${GPUCLOUD_DEMO_REGISTRY_PORT:-} && -s $D/registry/config.yml ]]; then
	# where an earlier `make demo` put it (the catalog names that address)
	REG_ADDR=$(awk '$1 == "addr:" { print $2; exit }' "$D/registry/config.yml")
	[[ $REG_ADDR == 127.0.0.1:* ]] || REG_ADDR=127.0.0.1:5056
fi
REG_USER=demo
NODES=(1)
CACHE=${GPUCLOUD_WORLD_CACHE:-$ROOT/var/cache}
BUILD=$D/build
TAG_SUFFIX=
DOCKERCFG=$D/dockercfg
ENGINE= # node local's engine, read from the API
reg_key() { cat "$D/registry/key"; }
dk() {
	shift # one engine: node local's
	"$DOCKER_CLI" --config "$DOCKERCFG" -H "$ENGINE" "$@"
}
# shellcheck source=deploy/images.sh
. "$ROOT/deploy/images.sh"
RECIPE_NAME=jupyter

TMP=
CSRF=
cleanup() {
	local rc=$?
	if [[ -n $CSRF ]]; then # end the session
		curl -sS -m 10 -o /dev/null -X POST -b "$TMP/jar" -H "Origin: $API" \
			-H "X-CSRF-Token: $CSRF" "$API/api/v1/auth/logout" 2>/dev/null || true
	fi
	[[ -z $TMP ]] || rm -rf -- "$TMP"
	return "$rc"
}

# ---------------------------------------------------------------------------
# The API, as the admin with a session (cookie and CSRF token).

# call METHOD PATH [JSON] [STATUS...] : the reply's body goes to $TMP/body;
# dies with the server's error unless the status is one of STATUS (2xx when
# none is named).
call() {
	local method=$1 path=$2 body=${3:-} code want ok=0
	shift $(($# < 3 ? $# : 3))
	local -a args=(-sS -m 60 -X "$method" -b "$TMP/jar" -c "$TMP/jar" -o "$TMP/body"
		-w '%{http_code}' -H "Origin: $API")
	[[ -z $CSRF ]] || args+=(-H "X-CSRF-Token: $CSRF")
	[[ -z $body ]] || args+=(-H 'Content-Type: application/json' --data-binary @-)
	code=$(printf '%s' "$body" | curl "${args[@]}" "$API/api/v1$path") ||
		die "$method $path: no answer from $API"
	if (($#)); then
		for want; do [[ $code == "$want" ]] && ok=1; done
	elif [[ $code == 2?? ]]; then
		ok=1
	fi
	((ok)) || die "$method $path answered $code: $(jq -r '.error | "\(.message)\(if .hint then " (\(.hint))" else "" end)"' "$TMP/body" 2>/dev/null || head -c 300 "$TMP/body")"
	STATUS=$code
}

# j [JQ OPTIONS...] FILTER : jq -r over the last reply.
j() {
	jq -r "$@" "$TMP/body"
}

server_answers() {
	curl -fsS -m 5 -o /dev/null "$API/healthz" 2>/dev/null
}

login() {
	local pw
	if [[ -n ${GPUCLOUD_ADMIN_PASSWORD:-} ]]; then
		pw=$GPUCLOUD_ADMIN_PASSWORD
	elif [[ -r $STATE/admin-password ]]; then
		pw=$(<"$STATE/admin-password")
	else
		die "no admin password: $STATE/admin-password is missing; set GPUCLOUD_ADMIN_PASSWORD"
	fi
	call POST /auth/login "$(jq -nc --arg p "$pw" '{username: "admin", password: $p}')" 200 401 429
	case $STATUS in
	401) die "the admin password was refused (from ${GPUCLOUD_ADMIN_PASSWORD:+GPUCLOUD_ADMIN_PASSWORD}${GPUCLOUD_ADMIN_PASSWORD:-$STATE/admin-password})" ;;
	429) die "logins are throttled; try again in a minute" ;;
	esac
	CSRF=$(j .csrf_token)
}

# ---------------------------------------------------------------------------
# Steps; each looks first and changes only what is missing.

# Sets ENGINE and NODE_ID from node `local`, once it is up (a server that
# has just started checks its engine within node_check_interval_s).
find_node() {
	local state i
	for ((i = 0; i < 30; i++)); do
		call GET /nodes
		NODE_ID=$(j '.items[] | select(.name == "local") | .id')
		[[ -n $NODE_ID ]] || die "no node 'local': \`make run\` registers the local Docker engine as 'local' when one answers (see its output)"
		ENGINE=$(j '.items[] | select(.name == "local") | .url')
		state=$(j '.items[] | select(.name == "local") | .state')
		[[ $ENGINE == unix://* ]] || die "node 'local' is $ENGINE; the demo builds its image on a unix:// engine"
		[[ $state == up ]] && return 0
		sleep 1
	done
	die "node 'local' is $state; its engine ($ENGINE) must answer"
}

gpus_up() {
	local i dev have decl='[]'
	install -d -m 0755 "$D/gpus"
	for ((i = 0; i < GPUS; i++)); do
		dev=$D/gpus/nvidia$i
		if [[ ! -c $dev ]]; then
			[[ $(id -u) -eq 0 ]] || die "making the simulated GPUs' device files needs root (mknod $dev)"
			mknod -m 0666 "$dev" c 195 "$i"
		fi
		decl=$(jq -c --arg m "$GPU_MODEL" --argjson mem "$GPU_MEMORY_MIB" --arg d "$dev" \
			'. + [{model: $m, memory_mib: $mem, devices: [$d]}]' <<<"$decl")
	done
	call GET "/nodes/$NODE_ID"
	have=$(j '.gpus | length')
	if ((have > 0)); then
		# ours (an earlier demo) or the node's own: left as they are
		[[ $(j --arg d "$D/gpus/" '[.gpus[].devices[0] // "" | startswith($d)] | all') == true ]] ||
			say "node 'local' has $have GPUs of its own: the demo uses them as they are"
		return 0
	fi
	say "declaring $GPUS simulated GPUs on node 'local' ($D/gpus)"
	call PATCH "/nodes/$NODE_ID" "$(jq -nc --argjson g "$decl" '{gpus: $g}')"
}

NEW_KEY=0
registry_up() {
	install -d -m 0700 "$D"
	[[ -s $D/registry/key ]] || NEW_KEY=1
	registry_serve "$D/registry" "$REG_ADDR" "$REG_USER" gpucloud-demo-registry \
		"the registry of \`make demo\`"
}

# Builds the recipe's image and pushes it, unless the registry has it.
image_up() {
	local ref also r
	ref=$(image_ref "$RECIPE_NAME")
	also=$(image_also "$RECIPE_NAME")
	if [[ -z ${GPUCLOUD_DEMO_IMAGE_FROM:-} ]]; then
		if ! image_in_registry "$ref" && [[ ! -s $(rootfs_cache "$RECIPE_NAME") ]]; then
			say "the first build debootstraps Debian bookworm with Jupyter (a few minutes; needs a Debian mirror)"
		fi
		images_build "$RECIPE_NAME"
		return 0
	fi
	image_in_registry "$ref" && return 0
	say "pushing $GPUCLOUD_DEMO_IMAGE_FROM as $ref"
	dk 1 image inspect "$GPUCLOUD_DEMO_IMAGE_FROM" >/dev/null 2>&1 ||
		dk 1 pull -q "$GPUCLOUD_DEMO_IMAGE_FROM" >/dev/null ||
		die "image '$GPUCLOUD_DEMO_IMAGE_FROM' is not on the engine and could not be pulled"
	registry_login
	for r in "$ref" ${also:+"$also"}; do
		dk 1 tag "$GPUCLOUD_DEMO_IMAGE_FROM" "$r"
		dk 1 push -q "$r" >/dev/null || die "could not push $r"
		dk 1 rmi "$r" >/dev/null
	done
}

# Sets REGISTRY_ID.
catalog_registry() {
	local personal
	call GET /registries
	REGISTRY_ID=$(j '.items[] | select(.name == "demo") | .id')
	if [[ -n $REGISTRY_ID ]]; then
		if [[ $(j '.items[] | select(.name == "demo") | .server') != "$REG_ADDR" ]] || ((NEW_KEY)); then
			# its folder was removed (a new password) or it has a new port
			say "registry 'demo' is now $REG_ADDR with a new password"
			call PATCH "/registries/$REGISTRY_ID" "$(jq -nc --arg s "$REG_ADDR" --arg p "$(reg_key)" \
				'{server: $s, password: $p}')"
		fi
		return 0
	fi
	# Save as image pushes to the personal registry: this one, when there is none.
	personal=$(j '[.items[] | select(.personal)] | length == 0')
	say "adding registry 'demo' ($REG_ADDR)"
	call POST /registries "$(jq -nc --arg s "$REG_ADDR" --arg u "$REG_USER" --arg p "$(reg_key)" \
		--argjson personal "$personal" '{name: "demo", server: $s, username: $u, password: $p, personal: $personal}')"
	REGISTRY_ID=$(j .id)
}

# Sets IMAGE_ID; starts pulls to nodes that lack the image.
catalog_image() {
	local ref
	ref=$(image_ref "$RECIPE_NAME")
	call GET /images
	IMAGE_ID=$(j --arg r "$ref" '.items[] | select(.reference == $r and (.personal | not)) | .id')
	if [[ -z $IMAGE_ID ]]; then
		say "adding catalog image $ref"
		call POST /images "$(jq -nc --arg r "$ref" --argjson reg "$REGISTRY_ID" --argjson cmd "$JUPYTER_CMD" '{
			reference: $r, registry_id: $reg, display_name: "Jupyter Notebook (demo)",
			framework: "jupyter", visibility: "everyone", default_cmd: $cmd,
			description: "demo: Jupyter Notebook from Debian packages, built locally by make demo",
			app_ports: [{name: "jupyter", port: 8888}]}')"
		IMAGE_ID=$(j .id)
	fi
	call GET "/images/$IMAGE_ID"
	if [[ $(j '[.nodes[] | select(.state == "absent" or .state == "failed")] | length') != 0 ]]; then
		say "pulling the image to the nodes that lack it"
		call POST "/images/$IMAGE_ID/pull" '{}'
	fi
}

# Sets POOL_ID.
pool_up() {
	local p ids free
	call GET /pools
	POOL_ID=$(j --arg n "$POOL" '.items[] | select(.name == $n) | .id')
	if [[ -z $POOL_ID ]]; then
		say "adding pool '$POOL'"
		call POST /pools "$(jq -nc --arg n "$POOL" '{name: $n, sharing: "exclusive",
			description: "demo: simulated GPUs on this machine (make demo); containers get device files, no GPU"}')"
		POOL_ID=$(j .id)
	fi
	call GET "/pools/$POOL_ID"
	(($(j .gpus) == 0)) || return 0
	# node local's GPUs that are in no pool yet
	call GET /pools
	ids=$(j '[.items[].id] | join(" ")')
	: >"$TMP/taken"
	for p in $ids; do
		call GET "/pools/$p"
		j '.nodes[]?.gpus[]?.id' >>"$TMP/taken"
	done
	call GET "/nodes/$NODE_ID"
	jq -s . "$TMP/taken" >"$TMP/taken.json"
	free=$(j -c --slurpfile taken "$TMP/taken.json" '[.gpus[].id | select(. as $i | $taken[0] | index($i) | not)]')
	[[ $free != '[]' ]] || die "node 'local' has no GPU outside other pools for pool '$POOL'"
	say "pool '$POOL' gets node local's GPUs $free"
	call PUT "/pools/$POOL_ID/gpus" "$(jq -nc --argjson g "$free" '{gpu_ids: $g}')"
}

# saved_password USER : the password saved for USER, or nothing.
saved_password() {
	[[ -r $ACCOUNTS ]] || return 0
	awk -v u="$1" '$1 == u { print $3; exit }' "$ACCOUNTS"
}

new_password() {
	local p
	p=$(openssl rand -base64 18 | tr -dc 'A-Za-z0-9' | head -c 14)
	printf 'demo-%s\n' "$p"
}

# user_up NAME ROLE DISPLAY SLICES CPU MEM : the account and its quota on
# the pool; appends "NAME ROLE PASSWORD" to $TMP/accounts.
user_up() {
	local name=$1 role=$2 display=$3 slices=$4 cpu=$5 mem=$6 id pw want
	pw=$(saved_password "$name")
	call GET "/users?q=$name"
	id=$(j --arg n "$name" '.items[] | select(.username == $n) | .id')
	if [[ -z $id ]]; then
		pw=$(new_password)
		say "adding $role $name"
		call POST /users "$(jq -nc --arg u "$name" --arg r "$role" --arg d "$display" --arg p "$pw" \
			'{username: $u, role: $r, display_name: $d, password: $p}')"
		id=$(j .user.id)
	elif [[ -z $pw ]]; then
		# made by an earlier demo whose saved passwords are gone: a new one
		pw=$(new_password)
		say "$name exists without a saved password: setting a new one"
		# printed for use right away: no forced change at the next sign-in
		call POST "/users/$id/password" "$(jq -nc --arg p "$pw" '{password: $p, must_change_password: false}')"
	fi
	printf '%s %s %s\n' "$name" "$role" "$pw" >>"$TMP/accounts"
	want=$(jq -nc --argjson s "$slices" --argjson c "$cpu" --argjson m "$mem" \
		'{max_slices: $s, max_cpu_millis: $c, max_mem_mib: $m, gpu_hours_per_week: null, max_runtime_s: null}')
	call GET "/quotas?user_id=$id"
	if [[ $(j --arg p "$POOL" --argjson w "$want" \
		'[.items[] | select(.pool == $p) | {max_slices, max_cpu_millis, max_mem_mib, gpu_hours_per_week, max_runtime_s} == $w] | any') != true ]]; then
		say "quota of $name on pool '$POOL': $slices GPUs, $((cpu / 1000)) CPUs, $((mem / 1024)) GiB"
		call PUT /quotas "$(jq -nc --argjson id "$id" --arg p "$POOL" --argjson w "$want" \
			'$w + {user_id: $id, pool: $p}')"
	fi
}

users_up() {
	local i=1 s
	: >"$TMP/accounts"
	user_up "$TEACHER" teacher 'Demo Teacher' 2 8000 16384
	for s in "${STUDENTS[@]}"; do
		user_up "$s" student "Demo Student $i" 1 4000 8192
		i=$((i + 1))
	done
	install -d -m 0700 "$STATE"
	{
		printf '# make demo: demo accounts (username role password) on %s\n' "$API"
		cat "$TMP/accounts"
	} >"$TMP/accounts.new"
	if ! cmp -s "$TMP/accounts.new" "$ACCOUNTS" 2>/dev/null; then
		install -m 0600 "$TMP/accounts.new" "$ACCOUNTS"
	fi
}

report() {
	cat >&2 <<EOF

  gpucloud demo — simulated GPUs, not real ones: containers get device files,
  nothing computes on a GPU. Open $API/ and sign in as one of:

$(awk '!/^#/ { printf "    %-15s %-8s %s\n", $1, $2, $3 }' "$ACCOUNTS")

  (saved in $ACCOUNTS). A student: Instances → New instance →
  "Jupyter Notebook (demo)", pool "$POOL", 1 GPU → Open Jupyter.
  The admin sees it all under Administration. \`make demo\` again changes nothing.

EOF
}

cmd_up() {
	for t in curl jq htpasswd openssl; do
		command -v "$t" >/dev/null 2>&1 || die "$t is missing; run deploy/deps.sh (make deps)"
	done
	server_answers || die "no gpucloudd answers on $API: start it first with \`make run\` (in another terminal), then run \`make demo\` again"
	TMP=$(mktemp -d)
	trap cleanup EXIT
	login
	find_node
	gpus_up
	registry_up
	image_up
	catalog_registry
	catalog_image
	pool_up
	users_up
	report
}

case ${1:-up} in
up) cmd_up ;;
down) registry_stop "$D/registry" ;;
registry)
	[[ -s $D/registry/config.yml ]] || exit 0 # no demo here
	registry_up
	;;
*)
	printf 'usage: %s [up|down|registry]\n' "$0" >&2
	exit 2
	;;
esac
