#!/usr/bin/env bash
# restore.sh — puts a backup made by deploy/backup.sh back: the database into
# an empty database, the data root and the state directory (master key
# included) into empty folders.  gpucloudd must be stopped; start it
# afterwards (the same release or a newer one: migrations run at its start).
#
# Usage: restore.sh --from BACKUP_DIR [--config FILE] [--db-url URL]
#                   [--state-dir DIR] [--data-root DIR] [--force]
#   Settings are found as backup.sh finds them (config file, environment,
#   flags): they name where to restore to, which may differ from where the
#   backup was made.  The database must exist and hold no tables (e.g.
#   `createdb -O gpucloud gpucloud`; roles are the cluster's, make them
#   first); the data root and state directory must be empty or absent.
#   --force   restore into a data root or state directory that has files
#             (they are removed first; the database must still be empty)
#
# Run it as root (the files go back to the users' uids).  The database
# restore is one transaction: it either happens whole or not at all.
set -euo pipefail
umask 077
PROG=restore

say() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
	printf '%s: error: %s\n' "$PROG" "$*" >&2
	exit 1
}

config=/etc/gpucloud/gpucloud.conf config_given=0 from='' force=0
db_url='' state_dir='' data_root='' data_root_set=0
while (($#)); do
	case $1 in
	-h | --help)
		sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	--force)
		force=1
		shift
		;;
	--*=*) set -- "${1%%=*}" "${1#*=}" "${@:2}" ;;
	--from | --config | --db-url | --state-dir | --data-root)
		(($# >= 2)) || die "$1 needs a value"
		case $1 in
		--from) from=$2 ;;
		--config) config=$2 config_given=1 ;;
		--db-url) db_url=$2 ;;
		--state-dir) state_dir=$2 ;;
		--data-root) data_root=$2 data_root_set=1 ;;
		esac
		shift 2
		;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done
[[ -n $from ]] || die "--from BACKUP_DIR is needed"
[[ -d $from ]] || die "no backup at '$from'"

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
for d in "$state_dir" "$data_root"; do
	[[ $d == /* ]] || die "give absolute paths (state_dir '$state_dir', data_root '$data_root')"
	[[ ${d%/} != "" && ${d%/} != /srv && ${d%/} != /var && ${d%/} != /home ]] || die "refusing to restore into '$d'"
done
for t in pg_restore psql tar sha256sum; do command -v "$t" >/dev/null || die "$t is needed"; done

# 1. the backup is whole
from=$(cd -- "$from" && pwd -P)
(cd -- "$from" && sha256sum --quiet --check SHA256SUMS) || die "$from fails its checksums"
data_tar=$(find "$from" -maxdepth 1 -name 'data.tar.*' | head -n 1)
state_tar=$(find "$from" -maxdepth 1 -name 'state.tar.*' | head -n 1)
[[ -f $from/db.dump && -n $data_tar && -n $state_tar ]] || die "$from is not a backup made by backup.sh"
zprog=gzip
[[ $data_tar == *.zst ]] && zprog=zstd
command -v "${zprog%% *}" >/dev/null || die "$zprog is needed to read this backup"
grep '^schema migration' "$from/INFO" | sed "s/^/$PROG: backup at /" >&2 || true

# 2. the targets are empty (nothing is overwritten by accident)
tables=$(psql -qAtX --dbname="$db_url" -c \
	"SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')") ||
	die "cannot connect to the database (create it first, empty: createdb -O gpucloud gpucloud)"
((tables == 0)) || die "the database already has $tables tables: restore needs an empty one (drop and create it)"
inside=0
[[ $data_root == "$state_dir"/* ]] && inside=1
for d in "$state_dir" "$data_root"; do
	if [[ -d $d && -n $(ls -A -- "$d") ]]; then
		if [[ $d == "$state_dir" ]] && ((inside)) && [[ $(ls -A -- "$d") == "${data_root#"$state_dir"/}" ]]; then
			continue
		fi
		((force)) || die "'$d' is not empty (use --force to empty it first)"
	fi
done
if ((force)); then
	for d in "$data_root" "$state_dir"; do
		[[ -d $d ]] && find "$d" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +
	done
fi

# 3. database, in one transaction
say "database <- db.dump"
pg_restore --exit-on-error --single-transaction --dbname="$db_url" "$from/db.dump"

# 4. files, with their owners, modes, ACLs and extended attributes
tarx() { # ARCHIVE DIR
	tar --extract --file="$1" --use-compress-program="$zprog" --directory="$2" \
		--numeric-owner --same-owner --preserve-permissions --acls --xattrs --xattrs-include='*'
}
install -d -m 0700 "$state_dir"
say "state directory $state_dir <- $(basename -- "$state_tar")"
tarx "$state_tar" "$state_dir"
install -d -m 0755 "$data_root"
say "data root $data_root <- $(basename -- "$data_tar")"
tarx "$data_tar" "$data_root"
[[ -f $state_dir/master.key ]] || say "warning: the backup has no master.key: stored credentials cannot be decrypted"
say "done. Start gpucloudd (migrations run at its start) and check /readyz."
