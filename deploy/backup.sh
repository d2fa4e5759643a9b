#!/usr/bin/env bash
# backup.sh — one backup of a gpucloud site: the database (pg_dump custom
# format), the data root (homes, shared and class areas: a tar keeping
# numeric owners, modes, ACLs and extended attributes) and the state
# directory (master.key, which decrypts registry credentials and node TLS
# keys stored in the database, the admin password file, node TLS files).
# Restore with deploy/restore.sh.
#
# Usage: backup.sh [--config FILE] [--db-url URL] [--state-dir DIR]
#                  [--data-root DIR] [--out DIR]
#   Settings come from the config file (default /etc/gpucloud/gpucloud.conf
#   when it exists), then GPUCLOUD_DB_URL / GPUCLOUD_STATE_DIR /
#   GPUCLOUD_DATA_ROOT, then the flags, as gpucloudd reads them.
#   --out DIR    where the backup folder goes (default /var/backups/gpucloud);
#                it is DIR/gpucloud-<UTC time>, printed on stdout at the end
#
# Run it as root (the data root's files belong to the users' uids).  The
# database dump is one consistent snapshot; the data root is read while it
# may change, so for a backup in which files and database agree exactly stop
# gpucloudd first (systemctl stop gpucloudd), or accept that files written
# during the backup may be newer than the database.  The backup holds the
# master key and password hashes: keep it as secret as the server.
set -euo pipefail
umask 077
PROG=backup

say() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
	printf '%s: error: %s\n' "$PROG" "$*" >&2
	exit 1
}

config=/etc/gpucloud/gpucloud.conf config_given=0
db_url='' state_dir='' data_root='' data_root_set=0 out=/var/backups/gpucloud
while (($#)); do
	case $1 in
	-h | --help)
		sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	--*=*) set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
	--config | --db-url | --state-dir | --data-root | --out)
		(($# >= 2)) || die "$1 needs a value"
		case $1 in
		--config) config=$2 config_given=1 ;;
		--db-url) db_url=$2 ;;
		--state-dir) state_dir=$2 ;;
		--data-root) data_root=$2 data_root_set=1 ;;
		--out) out=$2 ;;
		esac
		shift 2
		;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done

# conf NAME : the setting's value from the config file ('' when absent)
conf() {
	[[ -r $config ]] || return 0
	awk -v k="$1" '{ n = $0; sub(/=.*/, "", n); gsub(/^[ \t]+|[ \t]+$/, "", n) }
		n == k && /=/ { v = substr($0, index($0, "=") + 1); gsub(/^[ \t]+|[ \t\r]+$/, "", v); r = v }
		END { print r }' "$config"
}
((config_given)) && [[ ! -r $config ]] && die "cannot read $config"
[[ -n $db_url ]] || db_url=${GPUCLOUD_DB_URL:-$(conf db_url)}
[[ -n $state_dir ]] || state_dir=${GPUCLOUD_STATE_DIR:-$(conf state_dir)}
if ((!data_root_set)); then data_root=${GPUCLOUD_DATA_ROOT:-$(conf data_root)}; fi
db_url=${db_url:-postgresql:///gpucloud}
state_dir=${state_dir:-var/state}
data_root=${data_root:-$state_dir/data}
[[ -d $state_dir ]] || die "state_dir '$state_dir' is not a directory"
[[ -d $data_root ]] || die "data_root '$data_root' is not a directory"
state_dir=$(cd -- "$state_dir" && pwd -P)
data_root=$(cd -- "$data_root" && pwd -P)
for t in pg_dump tar sha256sum; do command -v "$t" >/dev/null || die "$t is needed"; done

install -d -m 0700 "$out"
out=$(cd -- "$out" && pwd -P)
for d in "$state_dir" "$data_root"; do
	[[ $out/ != "$d"/* ]] || die "--out '$out' must not lie inside '$d' (it would back itself up)"
done
dest=$out/gpucloud-$(date -u +%Y%m%dT%H%M%SZ)
[[ ! -e $dest ]] || die "$dest exists already"
install -d -m 0700 "$dest.partial"
trap 'rm -rf -- "$dest.partial"' EXIT

say "database -> db.dump"
pg_dump --format=custom --compress=6 --file="$dest.partial/db.dump" --dbname="$db_url"
level=$(psql -qAtX --dbname="$db_url" -c 'SELECT max(version) FROM schema_migrations' 2>/dev/null || true)

# The tar program compresses with zstd where there is one.
zprog=gzip ext=gz
command -v zstd >/dev/null && zprog='zstd -T0 -3' ext=zst
tarc() { # ARCHIVE DIR [tar options...] : DIR's contents, owners and attributes kept
	local archive=$1 dir=$2 rc=0
	shift 2
	tar --create --file="$archive" --use-compress-program="$zprog" --directory="$dir" \
		--numeric-owner --preserve-permissions --acls --xattrs --xattrs-include='*' \
		--sparse --warning=no-file-changed --warning=no-file-removed "$@" . || rc=$?
	# 1: files changed or went away while they were read (a running server)
	if ((rc == 1)); then
		say "warning: files in $dir changed while they were read (stop gpucloudd for an exact copy)"
	elif ((rc != 0)); then
		die "tar of $dir failed (exit $rc)"
	fi
}

say "data root $data_root -> data.tar.$ext"
tarc "$dest.partial/data.tar.$ext" "$data_root"
# the state directory without the data root when that lies inside it
excl=()
[[ $data_root == "$state_dir"/* ]] && excl=(--exclude="./${data_root#"$state_dir"/}")
say "state directory $state_dir -> state.tar.$ext"
tarc "$dest.partial/state.tar.$ext" "$state_dir" "${excl[@]}"

{
	printf 'gpucloud backup\n'
	printf 'made %s on %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(hostname)"
	printf 'schema migration %s\n' "${level:-unknown}"
	printf 'state_dir %s\ndata_root %s\n' "$state_dir" "$data_root"
} >"$dest.partial/INFO"
(cd -- "$dest.partial" && sha256sum -- db.dump "data.tar.$ext" "state.tar.$ext" INFO >SHA256SUMS)
mv -- "$dest.partial" "$dest"
trap - EXIT
say "done: $(du -sh -- "$dest" | cut -f1) in $dest"
printf '%s\n' "$dest"
