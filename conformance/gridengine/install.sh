#!/bin/sh
# Son of Grid Engine 8.1.9 (Debian packages gridengine-master, -exec, -client) on this
# machine, ready for the referee (python -m conformance.gridengine). Idempotent: every step
# checks first. Run as root. It records in $STATE/started the daemons it started itself, so
# that `python -m conformance.gridengine --stop` stops exactly those.
#
# Output of this script's own decisions goes to stderr; nothing else is written outside
# $SGE_ROOT, $STATE, /etc/hosts and /etc/netns (the names of the execution hosts h2-h4 in
# network namespaces; JOBMATCH_CONFORMANCE_HOSTS= leaves them out) and the
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

# 5. Daemons. qmaster first; then the admin and submit host.
QMASTER_PID=/var/spool/gridengine/qmaster/qmaster.pid
if ! running "$QMASTER_PID"; then
    say "starting sge_qmaster"
    /usr/sbin/sge_qmaster
    for _ in $(seq 1 60); do qstat -f >/dev/null 2>&1 && break; sleep 0.5; done
    echo "qmaster $(cat "$QMASTER_PID")" >> "$STATE/started"
fi
qconf -sh 2>/dev/null | grep -q -x "$HOST" || qconf -ah "$HOST" >&2
qconf -ss 2>/dev/null | grep -q -x "$HOST" || qconf -as "$HOST" >&2

# 6. The load sensor (sge_conf(5) load_sensor) reports the case's load values from
# $STATE/loads every second. An execd reads load_sensor when it starts: one already
# running without it is restarted (and left running afterwards, as it was).
HERE=$(cd "$(dirname "$0")" && pwd)
# Rewritten only when it changes: an execd restarts its sensor when the file changes.
sed "s|^FILE=.*|FILE=$STATE/loads|" "$HERE/load_sensor.sh" > "$STATE/load_sensor.new"
if cmp -s "$STATE/load_sensor.new" "$STATE/load_sensor"; then
    rm -f "$STATE/load_sensor.new"
else
    chmod 755 "$STATE/load_sensor.new"
    mv "$STATE/load_sensor.new" "$STATE/load_sensor"
fi
touch "$STATE/loads"
chmod 755 "$STATE"
chmod 644 "$STATE/loads"
# min_uid/min_gid 0: cases may submit as root (quota filters such as "users !root"); the
# package's 1000 refuses root's jobs at submission.
if ! qconf -sconf global | grep -q "^load_sensor *$STATE/load_sensor\$" \
   || ! qconf -sconf global | grep -q "^load_report_time *00:00:01\$" \
   || ! qconf -sconf global | grep -q "^min_uid *0\$" \
   || ! qconf -sconf global | grep -q "^min_gid *0\$"; then
    CONFDIR=$(mktemp -d)
    qconf -sconf global | sed \
        -e "s|^load_sensor .*|load_sensor                  $STATE/load_sensor|" \
        -e "s|^min_uid .*|min_uid                      0|" \
        -e "s|^min_gid .*|min_gid                      0|" \
        -e "s|^load_report_time .*|load_report_time             00:00:01|" > "$CONFDIR/global"
    qconf -Mconf "$CONFDIR/global" >&2
    rm -rf "$CONFDIR"
fi

# execd spools under the name it resolves for itself (localhost or the host name; hN for
# the execution hosts in network namespaces). execd_pid_file h1|hN.
execd_pid_file() {
    for f in /var/spool/gridengine/execd/*/execd.pid; do
        d=$(basename "$(dirname "$f")")
        case "$1:$d" in
            h1:h[0-9]*) continue ;;  # another execution host's
            h1:*) ;;
            *) [ "$d" = "$1" ] || continue ;;
        esac
        running "$f" && { echo "$f"; return 0; }
    done
    return 1
}
# stop_execd NAME HOST: a controlled shutdown (qconf -ke) of a running execd that runs no
# load sensor (it started before the setting), then wait for it to exit.
stop_execd() {
    pidfile=$(execd_pid_file "$1") || return 0
    pid=$(cat "$pidfile")
    # The sensor may be between two runs (the execd restarts it): look for 3 s.
    for _ in $(seq 1 6); do
        ps -o args= --ppid "$pid" | grep -q load_sensor && return 0
        sleep 0.5
    done
    say "restarting the execd of $1 (pid $pid) for the load sensor"
    qconf -ke "$2" >&2 || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.25; done
}
if execd_pid_file h1 >/dev/null; then
    stop_execd h1 "$HOST"
else
    NEW_EXECD=yes
fi
if ! execd_pid_file h1 >/dev/null; then
    say "starting sge_execd"
    /usr/sbin/sge_execd
    for _ in $(seq 1 20); do execd_pid_file h1 >/dev/null && break; sleep 0.5; done
    if [ "${NEW_EXECD:-no}" = yes ]; then
        echo "execd $(cat "$(execd_pid_file h1)")" >> "$STATE/started"
    fi
fi

# 7. More execution hosts h2, h3, h4: each an execd in network namespace hN with its own
# address 10.99.(N-2).2 on a veth pair (10.99.(N-2).1 on this side) and its own UTS name,
# on the same file system. Skipped with a warning when the kernel refuses network
# namespaces: the cases that need them are then "not refereeable here".
setup_ns() {
    n=$1
    i=$((${n#h} - 2))
    here=veth-m${n#h}
    [ "$n" = h2 ] && here=veth-h1  # the first one's name, kept for installations made with it
    ip netns list 2>/dev/null | grep -q "^$n\b" || ip netns add "$n" || return 1
    if ! ip link show "$here" >/dev/null 2>&1; then
        ip link add "$here" type veth peer name "veth-$n" || return 1
        ip link set "veth-$n" netns "$n" || return 1
        ip addr add "10.99.$i.1/24" dev "$here" || return 1
    fi
    ip link set "$here" up || return 1
    ip netns exec "$n" sh -c "ip addr show veth-$n | grep -q 10.99.$i.2 \
        || ip addr add 10.99.$i.2/24 dev veth-$n" || return 1
    ip netns exec "$n" ip link set "veth-$n" up || return 1
    ip netns exec "$n" ip link set lo up || return 1
    grep -q "^10.99.$i.2[[:space:]]\+$n\$" /etc/hosts || echo "10.99.$i.2 $n" >> /etc/hosts
    mkdir -p "/etc/netns/$n"
    printf '127.0.0.1 localhost\n10.99.%s.1 %s\n10.99.%s.2 %s\n' "$i" "$HOST" "$i" "$n" \
        > "/etc/netns/$n/hosts"
    qconf -sh 2>/dev/null | grep -q -x "$n" || qconf -ah "$n" >&2
    new=no
    if execd_pid_file "$n" >/dev/null; then
        stop_execd "$n" "$n"
    else
        new=yes
    fi
    if ! execd_pid_file "$n" >/dev/null; then
        say "starting sge_execd of $n in network namespace $n"
        ip netns exec "$n" unshare --uts sh -c "hostname $n; exec /usr/sbin/sge_execd" || return 1
        for _ in $(seq 1 20); do execd_pid_file "$n" >/dev/null && break; sleep 0.5; done
        if [ "$new" = yes ]; then
            echo "execd-$n $(cat "$(execd_pid_file "$n")")" >> "$STATE/started"
        fi
    fi
}
EXTRA_HOSTS=${JOBMATCH_CONFORMANCE_HOSTS-h2 h3 h4}
for n in $EXTRA_HOSTS; do
    setup_ns "$n" || say "WARNING: no execution host $n (network namespaces refused)"
done
for h in $HOST $EXTRA_HOSTS; do
    qconf -sel 2>/dev/null | grep -q -x "$h" || continue
    for _ in $(seq 1 60); do
        qhost -h "$h" 2>/dev/null | awk -v h="$h" '$1 == h && $4 != "-" {f=1} END {exit !f}' && break
        sleep 0.5
    done
done

# 8. The stock attribute table, to restore it before every case.
if [ ! -s "$STATE/complexes.stock" ]; then
    qconf -sc > "$STATE/complexes.stock"
fi
dpkg-query -W -f='${Version}' gridengine-master > "$STATE/version"
say "ready: $(cat "$STATE/version") on $HOST"
