#!/bin/sh
# Son of Grid Engine 8.1.9 (Debian packages gridengine-master, -exec, -client) on this
# machine, ready for the referee (python -m conformance.gridengine). Idempotent: every step
# checks first. Run as root. It records in $STATE/started the daemons it started itself, so
# that `python -m conformance.gridengine --stop` stops exactly those.
#
# Output of this script's own decisions goes to stderr; nothing else is written outside
# $SGE_ROOT, $STATE, /etc/hosts (the second execution host's name, only with --h2) and the
# users it creates.
set -eu

SGE_ROOT=/var/lib/gridengine
SGE_CELL=default
export SGE_ROOT SGE_CELL
STATE=${JOBMATCH_CONFORMANCE_STATE:-/var/lib/jobmatch-conformance}
# Job owners of the cases (the users of quota sets and access lists) and the owner of
# jobs that name none (jobmatch's scenarios submit those as "scenario").
USERS="alice bob carol dave erin scenario"
HOST=$(hostname)

say() { echo "install.sh: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
    say "must run as root (it installs packages, starts daemons and creates users)"
    exit 2
fi
mkdir -p "$STATE"
touch "$STATE/started"

# 1. Packages, with the debconf questions answered (cell "default", this host as master).
if ! dpkg-query -W -f='${Status}' gridengine-master 2>/dev/null | grep -q "install ok installed" \
   || ! dpkg-query -W -f='${Status}' gridengine-exec 2>/dev/null | grep -q "install ok installed" \
   || ! dpkg-query -W -f='${Status}' gridengine-client 2>/dev/null | grep -q "install ok installed"; then
    for pkg in gridengine-common gridengine-client gridengine-master; do
        printf '%s shared/gridengineconfig boolean true\n' "$pkg"
        printf '%s shared/gridenginecell string default\n' "$pkg"
        printf '%s shared/gridenginesqmaster string %s\n' "$pkg" "$HOST"
    done | debconf-set-selections
    say "installing gridengine-master gridengine-exec gridengine-client"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        gridengine-master gridengine-exec gridengine-client >&2
fi

COMMON=$SGE_ROOT/$SGE_CELL/common
# 2. The package leaves act_qmaster empty when it may not start the daemons.
if [ ! -s "$COMMON/act_qmaster" ]; then
    say "writing $HOST to act_qmaster"
    echo "$HOST" > "$COMMON/act_qmaster"
fi

# 3. Grid Engine's own alias file: every name of this host's addresses in /etc/hosts is
# this host, so that qmaster does not resolve a loopback client to "localhost" and refuse
# it (host_aliases(5): the first name of a line is the unique one).
ADDRS=$(getent ahostsv4 "$HOST" | awk '{print $1}' | sort -u)
ALIASES=$(for a in $ADDRS 127.0.0.1; do
              awk -v a="$a" '$1 == a { for (i = 2; i <= NF; i++) print $i }' /etc/hosts
          done | grep -v -x "$HOST" | sort -u | tr '\n' ' ')
LINE=$(echo "$HOST $ALIASES" | sed 's/ *$//')
if [ "$(cat "$COMMON/host_aliases" 2>/dev/null)" != "$LINE" ]; then
    say "host_aliases: $LINE"
    echo "$LINE" > "$COMMON/host_aliases"
fi

# 4. Job owners (uid >= 1000: the cluster's min_uid).
for user in $USERS; do
    if ! id "$user" >/dev/null 2>&1; then
        say "creating user $user"
        useradd -m -s /bin/sh "$user"
    fi
done

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# 5. Daemons. qmaster first; then the admin and submit host and execd.
QMASTER_PID=/var/spool/gridengine/qmaster/qmaster.pid
if ! running "$QMASTER_PID"; then
    say "starting sge_qmaster"
    /usr/sbin/sge_qmaster
    for _ in $(seq 1 60); do qstat -f >/dev/null 2>&1 && break; sleep 0.5; done
    echo "qmaster $(cat "$QMASTER_PID")" >> "$STATE/started"
fi
qconf -sh 2>/dev/null | grep -q -x "$HOST" || qconf -ah "$HOST" >&2
qconf -ss 2>/dev/null | grep -q -x "$HOST" || qconf -as "$HOST" >&2

# execd spools under the name it resolves for itself (localhost or the host name); the
# second execution host's (h2) is not this one.
execd_pid_file() {
    for f in /var/spool/gridengine/execd/*/execd.pid; do
        [ "$(basename "$(dirname "$f")")" = h2 ] && continue
        running "$f" && { echo "$f"; return 0; }
    done
    return 1
}
if ! execd_pid_file >/dev/null; then
    say "starting sge_execd"
    /usr/sbin/sge_execd
    for _ in $(seq 1 20); do execd_pid_file >/dev/null && break; sleep 0.5; done
    echo "execd $(cat "$(execd_pid_file)")" >> "$STATE/started"
fi
for _ in $(seq 1 60); do
    qhost -h "$HOST" 2>/dev/null | awk -v h="$HOST" '$1 == h && $4 != "-" {f=1} END {exit !f}' && break
    sleep 0.5
done

# 6. The stock attribute table, to restore it before every case.
if [ ! -s "$STATE/complexes.stock" ]; then
    qconf -sc > "$STATE/complexes.stock"
fi
dpkg-query -W -f='${Version}' gridengine-master > "$STATE/version"
say "ready: $(cat "$STATE/version") on $HOST"
