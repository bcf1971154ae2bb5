#!/usr/bin/env bash
# slurm-cluster.sh: a real Slurm (Debian's slurm-wlm) on one machine, for the tests of
# packaging/slurm. munged and slurmctld run in this network namespace, one slurmd per
# "host" of a netns cluster (tests/cluster/netns-cluster.sh, without agents): every
# daemon in the foreground, no systemd, processes tracked by process group.
#
#   slurm-cluster.sh check        exit 0 if it can run here, else 77 + one line why
#   slurm-cluster.sh up DIR N     nodes h1..hN in partition "test"; DIR/slurm.env sets SLURM_CONF
#   slurm-cluster.sh down DIR     stop the daemons and every job, remove the network (idempotent)
#
# Jobs run as root, on nodes that are network namespaces whose host names are h1..hN and
# that resolve each other's names (as cluster DNS would). CLUSTER_OWNER_PID: as for
# netns-cluster.sh, the cluster goes down by itself when that process is gone.
set -euo pipefail

PROG=$(basename "$0")
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
NETNS=$SCRIPT_DIR/../cluster/netns-cluster.sh

die() { echo "$PROG: $*" >&2; exit 1; }
note() { echo "$PROG: $*" >&2; }

cmd_check() {
    local c
    for c in munged slurmctld slurmd sbatch scontrol squeue scancel; do
        command -v "$c" >/dev/null \
            || { echo "$c missing (apt-get install slurm-wlm munge)"; exit 77; }
    done
    bash "$NETNS" check
}

# wait_for SECONDS WHAT CMD...: until CMD succeeds, or die saying WHAT did not happen.
wait_for() {
    local limit=$1 what=$2 i
    shift 2
    for ((i = 0; i < limit * 5; i++)); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    die "$what within $limit s"
}

free_port() {  # free_port FROM: the first TCP port from FROM nobody listens on here
    local p=$1
    while ss -Htln "sport = :$p" | grep -q .; do p=$((p + 1)); done
    echo "$p"
}

write_conf() {
    local dir=$1 n=$2 ctl_ip=$3 ctl_port=$4 i
    local conf=$dir/slurm/slurm.conf
    mkdir -p "$dir/slurm/ctld" "$dir/slurm/log"
    {
        echo "# Written by $PROG for a test cluster in $dir"
        echo "ClusterName=scalelab-test"
        echo "SlurmctldHost=$(hostname -s)($ctl_ip)"
        echo "SlurmctldPort=$ctl_port"
        echo "SlurmdPort=6818"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        # cred_expire is also how long Slurm holds a requeued job back (120 s by default);
        # 30 s is still ample for a credential on one machine, and tst_slurm's requeue
        # test waits that much less.
        echo "AuthInfo=socket=$dir/munge/munge.socket,cred_expire=30"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "StateSaveLocation=$dir/slurm/ctld"
        echo "SlurmdSpoolDir=$dir/slurm/spool-%n"
        echo "SlurmctldPidFile=$dir/slurm/slurmctld.pid"
        echo "SlurmdPidFile=$dir/slurm/slurmd-%n.pid"
        echo "SlurmctldLogFile=$dir/slurm/log/slurmctld.log"
        echo "SlurmdLogFile=$dir/slurm/log/slurmd-%n.log"
        echo "ProctrackType=proctrack/pgid"
        echo "TaskPlugin=task/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "AccountingStorageType=accounting_storage/none"
        echo "JobCompType=jobcomp/none"
        echo "SchedulerType=sched/backfill"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "MpiDefault=none"
        echo "ReturnToService=2"
        echo "MailProg=/bin/true"
        echo "KillWait=10"
        echo "SlurmdTimeout=60"
        echo "MinJobAge=600"
        for ((i = 1; i <= n; i++)); do
            local ip_var="CLUSTER_IP_$i"
            echo "NodeName=h$i NodeHostname=h$i NodeAddr=${!ip_var} CPUs=$(nproc) State=UNKNOWN"
        done
        echo "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    } >"$conf"
}

cmd_up() {
    [[ $# -eq 2 ]] || die "usage: $PROG up DIR N"
    local why
    why=$(cmd_check 2>&1) || die "cannot run here: $why"
    mkdir -p "$1"
    local dir n=$2 i
    dir=$(cd "$1" && pwd -P)
    [[ ! -f $dir/slurm.env ]] || die "$dir: a Slurm cluster is already up here ($PROG down $dir first)"
    trap 'rc=$?; if ((rc != 0)); then note "up failed; cleaning up"; (cmd_down "$dir") >&2 || true; fi' EXIT
    CLUSTER_AGENTS=0 bash "$NETNS" up "$dir" "$n" >/dev/null
    # shellcheck disable=SC1091
    source "$dir/cluster.env"

    mkdir -p "$dir/munge"
    chmod 700 "$dir/munge"
    (umask 077 && head -c 1024 /dev/urandom >"$dir/munge/munge.key")
    chmod 400 "$dir/munge/munge.key"
    setsid munged --foreground --force --socket="$dir/munge/munge.socket" \
        --key-file="$dir/munge/munge.key" --log-file="$dir/munge/munged.log" \
        --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/munged.seed" \
        </dev/null >>"$dir/munge/munged.out" 2>&1 &
    echo $! >"$dir/munge/munged.pid.ours"
    wait_for 10 "munged did not start (see $dir/munge/munged.log)" test -S "$dir/munge/munge.socket"

    local port
    port=$(free_port 16817)
    write_conf "$dir" "$n" "$CLUSTER_CONSOLE_IP" "$port"
    export SLURM_CONF=$dir/slurm/slurm.conf
    printf 'SLURM_CONF=%q\nexport SLURM_CONF\n' "$SLURM_CONF" >"$dir/slurm.env.tmp"
    setsid slurmctld -D -i -f "$SLURM_CONF" </dev/null >>"$dir/slurm/log/slurmctld.out" 2>&1 &
    echo $! >"$dir/slurm/slurmctld.pid.ours"
    wait_for 20 "slurmctld did not answer (see $dir/slurm/log/slurmctld.log)" scontrol ping
    for ((i = 1; i <= n; i++)); do
        mkdir -p "$dir/slurm/spool-h$i"
        # Not `netns-cluster.sh exec`: `ip netns exec` mounts a fresh /sys without the
        # cgroup file systems, and slurmd will not start without them (even with
        # proctrack/pgid). The host's network namespace, its host name and its hosts file.
        local ns_var="CLUSTER_NS_$i"
        SLURM_CONF=$SLURM_CONF setsid nsenter --net="/run/netns/${!ns_var}" unshare --mount --uts -- \
            sh -c 'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"' sh \
            "/etc/netns/${!ns_var}/hosts" "h$i" slurmd -D -N "h$i" -f "$SLURM_CONF" \
            </dev/null >>"$dir/slurm/log/slurmd-h$i.out" 2>&1 &
    done
    all_idle() { [[ $(sinfo -h -N -o '%N %t' | grep -c ' idle$') -eq $n ]]; }
    wait_for 30 "not every node became idle (sinfo: $(sinfo -h -N -o '%N %t %E' | tr '\n' ';'))" all_idle
    mv "$dir/slurm.env.tmp" "$dir/slurm.env"
    trap - EXIT
    if [[ ${CLUSTER_OWNER_PID:-} =~ ^[0-9]+$ ]]; then
        setsid bash -c 'owner=$1 env=$2 script=$3 dir=$4
            while kill -0 "$owner" 2>/dev/null && [[ -f $env ]]; do sleep 1; done
            if [[ -f $env ]]; then bash "$script" down "$dir"; fi' watcher \
            "$CLUSTER_OWNER_PID" "$dir/slurm.env" "$SCRIPT_DIR/$PROG" "$dir" </dev/null >/dev/null 2>&1 &
    fi
    echo "slurm up: $n nodes h1..h$n, controller $CLUSTER_CONSOLE_IP:$port; source $dir/slurm.env"
}

stop_pid_file() {  # stop_pid_file FILE: TERM, then KILL after 5 s, the process it names
    local f=$1 p i
    [[ -f $f ]] || return 0
    p=$(cat "$f" 2>/dev/null || true)
    if [[ $p =~ ^[0-9]+$ ]] && kill -0 "$p" 2>/dev/null; then
        kill -TERM "$p" 2>/dev/null || true
        for ((i = 0; i < 25; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$p" 2>/dev/null || true
    fi
    rm -f "$f"
}

cmd_down() {
    [[ $# -eq 1 ]] || die "usage: $PROG down DIR"
    [[ -d $1 ]] || return 0
    local dir
    dir=$(cd "$1" && pwd -P)
    rm -f "$dir/slurm.env"
    # Every slurmd, slurmstepd and job process lives in the hosts' namespaces: taking the
    # network down kills them all. Then the controller and munge.
    if [[ -f $dir/.netns-cluster ]]; then bash "$NETNS" down "$dir" >/dev/null || true; fi
    stop_pid_file "$dir/slurm/slurmctld.pid.ours"
    stop_pid_file "$dir/munge/munged.pid.ours"
    rm -f "$dir/slurm.env.tmp"
}

case ${1:-} in
    check) cmd_check ;;
    up) shift; cmd_up "$@" ;;
    down) shift; cmd_down "$@" ;;
    *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
