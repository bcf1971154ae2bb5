#!/usr/bin/env bash
# netns-cluster.sh: "hosts" made of Linux network namespaces, for multi-host tests and
# benchmarks of scalelab-agent / scalelab-worker on one machine.
#
#   netns-cluster.sh check                      exit 0 if it can run here, else 77 + one line why
#   netns-cluster.sh check-netem                exit 0 if tc netem (delay) works here, else 77
#   netns-cluster.sh up DIR N [agent opts...]   N hosts h1..hN, TLS, token, data, one agent each;
#                                               {i} {host} {ip} in agent opts: per-host values
#   netns-cluster.sh down DIR                   stop everything, remove namespaces/links (idempotent)
#   netns-cluster.sh exec DIR I CMD...          run CMD "on" host I (its netns + its host name)
#   netns-cluster.sh cut DIR I | restore DIR I  take host I's link down / up again
#   netns-cluster.sh kill-agent DIR I           SIGKILL host I's agent
#   netns-cluster.sh start-agent DIR I          start host I's agent again, as `up` did
#   netns-cluster.sh shape DIR RATE DELAY       bandwidth (1gbit, 100mbit, none) and one-way
#                                               host-to-host delay (0.1ms, 2ms, none)
#   netns-cluster.sh env DIR                    print DIR/cluster.env
#
# Network: bridge sl<id>br in the root namespace at 10.213.X.1/24 (the console side), host I
# in namespace sl<id>hI with eth0 = 10.213.X.(10+I)/24, joined by veth sl<id>vI. <id> and X
# come from a hash of DIR (X moves on if that /24 is in use), so clusters in different DIRs
# do not collide. /etc/netns/sl<id>hI/hosts is stock Debian's (hI resolves to 127.0.1.1)
# plus the other hosts' names and addresses, as DNS would give them (CLUSTER_PEER_NAMES=0: not).
#
# Environment: SCALELAB_BIN_DIR (default <repo>/build/bin), CLUSTER_DATASET (default
# synthetic-cluster), CLUSTER_TRAIN_IMAGES (2048), CLUSTER_TEST_IMAGES (512),
# CLUSTER_PORT (7450), CLUSTER_AGENTS=0 (network, TLS and token only: no data, no agents),
# CLUSTER_READY_TIMEOUT (20 s), CLUSTER_OWNER_PID (the cluster goes down by itself when
# that process is gone, even if it never calls `down`), CLUSTER_HOST_CPUS (e.g. 0.5: each
# host's agent, and the workers it starts, run in a cgroup of their own with that CPU quota,
# cgroup v2's cpu.max or v1's cpu controller: 4 hosts of 0.5 on 2 cores are 4 machines of
# half a core that do not share cores; default: no quota, the hosts share the machine's).
set -euo pipefail

PROG=$(basename "$0")
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
BIN_DIR=${SCALELAB_BIN_DIR:-$SCRIPT_DIR/../../build/bin}
[[ -d $BIN_DIR ]] && BIN_DIR=$(cd "$BIN_DIR" && pwd)
PORT=${CLUSTER_PORT:-7450}
READY_TIMEOUT=${CLUSTER_READY_TIMEOUT:-20}
ETC_MARK=.created-by-netns-cluster

die() { echo "$PROG: $*" >&2; exit 1; }
note() { echo "$PROG: $*" >&2; }
usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# ---------------------------------------------------------------------------------------
# Names, derived from DIR.

# set_names DIR: CL_DIR, CL_ID, NS_PREFIX, CL_BRIDGE, CL_VPREFIX; X comes from state.
set_names() {
    [[ -n ${1:-} ]] || die "DIR missing"
    if [[ -d $1 ]]; then
        CL_DIR=$(cd "$1" && pwd -P)
    else
        [[ ! -e $1 ]] || die "$1: not a directory"
        CL_DIR=$(realpath -m -- "$1")
    fi
    CL_ID=$(printf '%s' "$CL_DIR" | sha256sum | cut -c1-6)
    NS_PREFIX="sl${CL_ID}h"    # namespace of host I: sl<id>hI
    CL_BRIDGE="sl${CL_ID}br"    # 10 chars
    CL_VPREFIX="sl${CL_ID}v"    # root-side veth of host I: sl<id>vI (<= 12 chars)
    CL_STATE="$CL_DIR/.netns-cluster"
}

ns_name() { echo "${NS_PREFIX}$1"; }
veth_name() { echo "${CL_VPREFIX}$1"; }
host_ip() { echo "10.213.${CL_X}.$((10 + $1))"; }

load_state() {
    [[ -f $CL_STATE ]] || die "$CL_DIR: no cluster here (no $CL_STATE); run '$PROG up' first"
    # shellcheck disable=SC1090
    source "$CL_STATE"
    CL_N=$STATE_N
    CL_X=$STATE_X
}

check_index() {
    [[ $1 =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= CL_N)) || die "host index '$1' not in 1..$CL_N"
}

# ---------------------------------------------------------------------------------------
# check

cmd_check() {
    if [[ $(id -u) != 0 ]]; then echo "not root (network namespaces need root)"; exit 77; fi
    command -v ip >/dev/null || { echo "ip missing (apt-get install iproute2)"; exit 77; }
    command -v tc >/dev/null || { echo "tc missing (apt-get install iproute2)"; exit 77; }
    command -v unshare >/dev/null || { echo "unshare missing (apt-get install util-linux)"; exit 77; }
    command -v openssl >/dev/null || { echo "openssl missing (apt-get install openssl)"; exit 77; }
    command -v sha256sum >/dev/null || { echo "sha256sum missing (apt-get install coreutils)"; exit 77; }
    local probe="slchk$$"
    local err
    if ! err=$(ip netns add "$probe" 2>&1); then
        echo "cannot create a netns: ${err//$'\n'/ }"; exit 77
    fi
    local ok=1 why=""
    if ! err=$(ip netns exec "$probe" unshare --uts -- sh -c 'hostname probe-h1 && hostname' 2>&1) \
            || [[ $err != probe-h1 ]]; then
        ok=0; why="cannot set a host name in a UTS namespace: ${err//$'\n'/ }"
    elif ! err=$(ip link add "${probe}a" type veth peer name eth0 netns "$probe" 2>&1); then
        ok=0; why="cannot create a veth pair into a netns: ${err//$'\n'/ }"
    elif ! err=$(ip link add "${probe}b" type bridge 2>&1); then
        ok=0; why="cannot create a bridge: ${err//$'\n'/ }"
    fi
    ip link del "${probe}a" >/dev/null 2>&1 || true
    ip link del "${probe}b" >/dev/null 2>&1 || true
    ip netns del "$probe" >/dev/null 2>&1 || true
    if ((ok == 0)); then echo "$why"; exit 77; fi
    exit 0
}

# Probe netem on a throw-away veth pair inside a scratch namespace.
netem_works() {
    local probe="slnetem$$" rc=1
    ip netns add "$probe" 2>/dev/null || return 1
    if ip -n "$probe" link add a type veth peer name b 2>/dev/null \
            && ip netns exec "$probe" tc qdisc add dev a root netem delay 1ms 2>/dev/null; then
        rc=0
    fi
    ip netns del "$probe" 2>/dev/null || true
    return $rc
}

cmd_check_netem() {
    [[ $(id -u) == 0 ]] || { echo "not root"; exit 77; }
    if netem_works; then exit 0; fi
    echo "tc netem unavailable on this kernel ($(uname -r)): sch_netem not built in or loadable (no delay emulation; rate-only shaping with tbf works)"
    exit 77
}

# ---------------------------------------------------------------------------------------
# TLS, token, data.

make_tls() {
    local d=$CL_DIR log=$CL_DIR/openssl.log
    : >"$log"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$d/ca.key" -out "$d/ca.pem" -days 30 -subj "/CN=scalelab netns cluster CA $CL_ID" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        >>"$log" 2>&1 || { cat "$log" >&2; die "openssl: cannot make the CA"; }
    chmod 600 "$d/ca.key"
    local i name
    for ((i = 1; i <= CL_N; i++)); do
        make_leaf "$d/h$i/tls" "h$i" "subjectAltName=IP:$(host_ip "$i"),DNS:h$i"
    done
    # A client certificate, for agents started with --tls-client-ca DIR/ca.pem.
    make_leaf "$d/client" "scalelab-client" "subjectAltName=DNS:scalelab-client"
}

# make_leaf PREFIX CN SAN: PREFIX.key + PREFIX.pem signed by the CA.
make_leaf() {
    local p=$1 cn=$2 san=$3 log=$CL_DIR/openssl.log
    mkdir -p "$(dirname "$p")"
    printf '%s\n' "$san" "basicConstraints=CA:FALSE" \
        "keyUsage=critical,digitalSignature,keyEncipherment" \
        "extendedKeyUsage=serverAuth,clientAuth" >"$p.ext"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$p.key" -out "$p.csr" -subj "/CN=$cn" >>"$log" 2>&1 \
        && openssl x509 -req -in "$p.csr" -CA "$CL_DIR/ca.pem" -CAkey "$CL_DIR/ca.key" \
            -CAcreateserial -days 30 -sha256 -extfile "$p.ext" -out "$p.pem" >>"$log" 2>&1 \
        || { cat "$log" >&2; die "openssl: cannot make the certificate for $cn"; }
    chmod 600 "$p.key"
    rm -f "$p.csr" "$p.ext"
}

make_token() {
    (umask 077 && openssl rand -hex 32 >"$CL_DIR/token") || die "cannot write $CL_DIR/token"
    chmod 600 "$CL_DIR/token"
}

make_dataset() {
    local name=$CL_DATASET src=$CL_DIR/.dataset/$CL_DATASET log=$CL_DIR/generate-synthetic.log
    [[ $name =~ ^[A-Za-z0-9._-]+$ ]] || die "CLUSTER_DATASET '$name': use letters, digits, . _ -"
    rm -rf "$src" && mkdir -p "$(dirname "$src")"
    "$BIN_DIR/scalelab-worker" generate-synthetic --out "$src" \
        --train "${CLUSTER_TRAIN_IMAGES:-2048}" --test "${CLUSTER_TEST_IMAGES:-512}" \
        >"$log" 2>&1 || { cat "$log" >&2; die "scalelab-worker generate-synthetic failed"; }
    local i
    for ((i = 1; i <= CL_N; i++)); do
        mkdir -p "$CL_DIR/h$i/data"
        rm -rf "$CL_DIR/h$i/data/$name"
        cp -a "$src" "$CL_DIR/h$i/data/$name" || die "cannot copy the data set to h$i"
    done
}

# ---------------------------------------------------------------------------------------
# Network.

pick_subnet() {
    local x=$(( (16#${CL_ID:0:4} % 250) + 1 )) tries
    for ((tries = 0; tries < 250; tries++)); do
        if [[ -z $(ip -4 -o addr show to "10.213.$x.0/24" 2>/dev/null) \
                && -z $(ip -4 route show to "10.213.$x.0/24" 2>/dev/null) ]]; then
            CL_X=$x; return 0
        fi
        x=$(( x % 250 + 1 ))
    done
    die "no free 10.213.X.0/24 subnet"
}

# write_hosts I: host I's /etc/hosts. Its own name is stock Debian's 127.0.1.1; the other
# hosts' names map to their addresses, as a site's DNS would (CLUSTER_PEER_NAMES=0: left out,
# so that other hosts' names do not resolve at all).
write_hosts() {
    local i=$1 j
    printf '127.0.0.1\tlocalhost\n127.0.1.1\th%d\n' "$i"
    if [[ ${CLUSTER_PEER_NAMES:-1} != 0 ]]; then
        printf '\n# the other hosts, as DNS would give them\n'
        for ((j = 1; j <= CL_N; j++)); do
            ((j == i)) || printf '%s\th%d\n' "$(host_ip "$j")" "$j"
        done
    fi
    printf '\n# The following lines are desirable for IPv6 capable hosts\n'
    printf '::1     localhost ip6-localhost ip6-loopback\nff02::1 ip6-allnodes\nff02::2 ip6-allrouters\n'
}

make_network() {
    ip link add "$CL_BRIDGE" type bridge || die "cannot create bridge $CL_BRIDGE"
    ip link set "$CL_BRIDGE" type bridge forward_delay 0 stp_state 0 2>/dev/null || true
    ip addr add "10.213.$CL_X.1/24" dev "$CL_BRIDGE" || die "cannot address bridge $CL_BRIDGE"
    ip link set "$CL_BRIDGE" up || die "cannot bring $CL_BRIDGE up"
    local i ns veth
    for ((i = 1; i <= CL_N; i++)); do
        ns=$(ns_name "$i"); veth=$(veth_name "$i")
        # Before any `ip netns exec`: it bind-mounts /etc/netns/NS/* over /etc/*.
        mkdir -p "/etc/netns/$ns" || die "cannot create /etc/netns/$ns"
        write_hosts "$i" >"/etc/netns/$ns/hosts" || die "cannot write /etc/netns/$ns/hosts"
        ip netns add "$ns" || die "cannot create namespace $ns"
        ip link add "$veth" type veth peer name eth0 netns "$ns" || die "cannot create veth $veth"
        ip link set "$veth" master "$CL_BRIDGE" || die "cannot attach $veth to $CL_BRIDGE"
        ip link set "$veth" up || die "cannot bring $veth up"
        ip -n "$ns" link set lo up || die "cannot bring lo up in $ns"
        ip -n "$ns" addr add "$(host_ip "$i")/24" dev eth0 || die "cannot address eth0 in $ns"
        ip -n "$ns" link set eth0 up || die "cannot bring eth0 up in $ns"
    done
}

# ---------------------------------------------------------------------------------------
# Agents.

in_host() {  # in_host I CMD...: run CMD in host I's namespace, with host name hI
    local i=$1; shift
    # `ip netns exec` mounts a sysfs of its own over /sys, without the cgroup file systems;
    # under CLUSTER_HOST_CPUS the host's processes see them again (in that private mount
    # namespace), so that a worker can read its CPU quota, as in a container.
    local cgroups=":"
    if [[ -n ${CLUSTER_HOST_CPUS:-} ]]; then
        if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
            cgroups="mount -t cgroup2 none /sys/fs/cgroup"
        else
            local cpu
            cpu=$(basename "$(dirname "$(ls -d /sys/fs/cgroup/*/cpu.cfs_quota_us | head -1)")")
            cgroups="mount -t tmpfs -o mode=755 cgroups /sys/fs/cgroup && mkdir /sys/fs/cgroup/$cpu"
            cgroups+=" && mount -t cgroup -o $cpu cgroup /sys/fs/cgroup/$cpu"
        fi
    fi
    exec ip netns exec "$(ns_name "$i")" unshare --uts -- \
        sh -c "hostname h$i && { $cgroups || echo 'h$i: cannot mount the cgroup file system' >&2; } && exec \"\$@\"" sh "$@"
}

pid_running() {  # alive and not a zombie waiting for its reaper
    local st
    st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}

agent_alive() {  # agent_alive I: its recorded PID is alive and inside host I's namespace
    local i=$1 pid
    pid=$(cat "$CL_DIR/h$i/agent.pid" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ ]] && pid_running "$pid" \
        && [[ $(ip netns identify "$pid" 2>/dev/null) == "$(ns_name "$i")" ]]
}

cpu_cgroup() {  # cpu_cgroup I: the cgroup of host I's CPU quota (CLUSTER_HOST_CPUS)
    if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then echo "/sys/fs/cgroup/scalelab-${CL_ID}-h$1"
    else echo "/sys/fs/cgroup/cpu/scalelab-${CL_ID}-h$1"; fi
}

limit_cpu() {  # limit_cpu I PID: PID (and the processes it starts) under host I's CPU quota
    [[ -n ${CLUSTER_HOST_CPUS:-} ]] || return 0
    local cg period=10000 quota
    cg=$(cpu_cgroup "$1")
    quota=$(awk -v c="$CLUSTER_HOST_CPUS" -v p=$period 'BEGIN { printf "%d", c * p }')
    ((quota >= 1000)) || die "CLUSTER_HOST_CPUS=$CLUSTER_HOST_CPUS: give 0.1 cores or more"
    mkdir -p "$cg" || die "cannot make the cgroup $cg (CLUSTER_HOST_CPUS needs root and the cpu controller)"
    if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
        grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control
        echo "$quota $period" >"$cg/cpu.max"
    else
        echo "$period" >"$cg/cpu.cfs_period_us"
        echo "$quota" >"$cg/cpu.cfs_quota_us"
    fi
    echo "$2" >"$cg/cgroup.procs"
}

start_agent() {  # start_agent I: start, record the PID, wait until it answers
    local i=$1
    local h=$CL_DIR/h$i
    local -a extra=()
    [[ -f $CL_DIR/agent-args ]] && mapfile -d '' -t extra <"$CL_DIR/agent-args"
    # Per-host placeholders in the extra options: {i}, {host} (hI), {ip}.
    local k
    for k in "${!extra[@]}"; do
        extra[k]=${extra[k]//\{i\}/$i}
        extra[k]=${extra[k]//\{host\}/h$i}
        extra[k]=${extra[k]//\{ip\}/$(host_ip "$i")}
    done
    mkdir -p "$h/state" "$h/data"
    if agent_alive "$i"; then die "h$i: agent already running (pid $(cat "$h/agent.pid"))"; fi
    local -a cmd=("$BIN_DIR/scalelab-agent" --listen 0.0.0.0 --port "$PORT"
        --token-file "$CL_DIR/token" --tls-cert "$h/tls.pem" --tls-key "$h/tls.key"
        --state-dir "$h/state" --data-dir "$h/data" --log-file "$h/agent.log" "${extra[@]}")
    echo "# $(date -Is) ${cmd[*]}" >>"$h/agent.out"
    # ip netns exec, unshare (no --fork), sh's exec: each execs, so $! is the agent.
    (in_host "$i" "${cmd[@]}") </dev/null >>"$h/agent.out" 2>&1 &
    local pid=$!
    echo "$pid" >"$h/agent.pid"
    local waited=0 exe=""
    while ((waited < 50)); do   # the exec chain takes a few ms
        exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
        [[ $exe == */scalelab-agent ]] && break
        pid_running "$pid" || break
        sleep 0.1; waited=$((waited + 1))
    done
    if [[ $exe != */scalelab-agent ]]; then
        if [[ -z $exe ]]; then note "h$i: the agent exited at once"
        else note "h$i: PID $pid is $exe, not scalelab-agent"; fi
        dump_agent "$i"; die "h$i: agent did not start"
    fi
    limit_cpu "$i" "$pid"
    wait_agent "$i"
}

dump_agent() {
    local h=$CL_DIR/h$1
    note "---- h$1 agent.out"; tail -n 40 "$h/agent.out" >&2 2>/dev/null || true
    note "---- h$1 agent.log"; tail -n 40 "$h/agent.log" >&2 2>/dev/null || true
}

wait_agent() {
    local i=$1 addr deadline out=""
    addr=$(host_ip "$i"):$PORT
    deadline=$((SECONDS + READY_TIMEOUT))
    while ((SECONDS < deadline)); do
        if ! agent_alive "$i"; then
            note "h$i: agent exited before answering"; dump_agent "$i"; die "h$i: agent failed"
        fi
        if out=$(SCALELAB_TLS_CA=$CL_DIR/ca.pem timeout 10 "$BIN_DIR/scalelab-cli" describe \
                --agent "$addr" --token-file "$CL_DIR/token" 2>&1); then
            return 0
        fi
        sleep 0.3
    done
    note "h$i: agent at $addr did not answer within ${READY_TIMEOUT}s; last describe said:"
    echo "$out" | tail -n 10 >&2
    dump_agent "$i"
    die "h$i: agent not ready"
}

write_env() {
    local f=$CL_DIR/cluster.env i agents=""
    {
        echo "# netns cluster in $CL_DIR (netns-cluster.sh)"
        printf 'CLUSTER_DIR=%q\n' "$CL_DIR"
        printf 'CLUSTER_N=%q\n' "$CL_N"
        printf 'CLUSTER_BRIDGE=%q\n' "$CL_BRIDGE"
        printf 'CLUSTER_SUBNET=%q\n' "10.213.$CL_X.0/24"
        printf 'CLUSTER_CONSOLE_IP=%q\n' "10.213.$CL_X.1"
        for ((i = 1; i <= CL_N; i++)); do
            printf 'CLUSTER_NS_%d=%q\n' "$i" "$(ns_name "$i")"
            printf 'CLUSTER_IP_%d=%q\n' "$i" "$(host_ip "$i")"
            printf 'CLUSTER_HOST_%d=%q\n' "$i" "h$i"
            printf 'CLUSTER_VETH_%d=%q\n' "$i" "$(veth_name "$i")"
            printf 'CLUSTER_AGENT_%d=%q\n' "$i" "$(host_ip "$i"):$PORT"
            agents+="${agents:+ }$(host_ip "$i"):$PORT"
        done
        printf 'CLUSTER_AGENTS=%q\n' "$agents"
        printf 'CLUSTER_CA=%q\n' "$CL_DIR/ca.pem"
        printf 'CLUSTER_TOKEN_FILE=%q\n' "$CL_DIR/token"
        printf 'CLUSTER_CLIENT_CERT=%q\n' "$CL_DIR/client.pem"
        printf 'CLUSTER_CLIENT_KEY=%q\n' "$CL_DIR/client.key"
        printf 'CLUSTER_DATASET=%q\n' "$CL_DATASET"
    } >"$f.tmp" && mv "$f.tmp" "$f"
}

# ---------------------------------------------------------------------------------------
# up / down

cmd_up() {
    [[ $# -ge 2 ]] || usage
    mkdir -p "$1" || die "cannot create $1"
    set_names "$1"; shift
    CL_N=$1; shift
    [[ $CL_N =~ ^[0-9]+$ ]] && ((CL_N >= 1 && CL_N <= 200)) || die "N '$CL_N': 1..200"
    local why
    why=$(cmd_check 2>&1) || die "cannot run here: $why"
    local with_agents=${CLUSTER_AGENTS:-1}
    if [[ $with_agents != 0 ]]; then
        local b
        for b in scalelab-agent scalelab-worker scalelab-cli; do
            [[ -x $BIN_DIR/$b ]] || die "$BIN_DIR/$b missing (build first, or set SCALELAB_BIN_DIR)"
        done
    fi
    if [[ -f $CL_STATE ]] || ip netns list 2>/dev/null | grep -q "^${NS_PREFIX}[0-9]" \
            || ip link show "$CL_BRIDGE" >/dev/null 2>&1; then
        die "$CL_DIR: a cluster is already up here (run '$PROG down $CL_DIR' first)"
    fi
    CL_DATASET=${CLUSTER_DATASET:-synthetic-cluster}
    # Clusters come up side by side (ctest -j): the subnet is chosen and taken under a lock.
    exec 9>"${TMPDIR:-/tmp}/scalelab-netns-cluster.lock"
    flock 9 || die "cannot lock ${TMPDIR:-/tmp}/scalelab-netns-cluster.lock"
    pick_subnet
    # State first, so that `down` finds everything if anything below fails.
    printf 'STATE_N=%q\nSTATE_X=%q\nSTATE_ID=%q\n' "$CL_N" "$CL_X" "$CL_ID" >"$CL_STATE"
    trap 'rc=$?; if ((rc != 0)); then note "up failed; cleaning up"; (cmd_down "$CL_DIR") >&2 || true; fi' EXIT
    trap 'exit 130' INT TERM
    if [[ ! -d /etc/netns ]]; then   # ours, then: `down` removes it when it is empty again
        mkdir -p /etc/netns && : >"/etc/netns/$ETC_MARK" || die "cannot create /etc/netns"
    fi
    printf '%s\0' "$@" >"$CL_DIR/agent-args"
    [[ $# -gt 0 ]] || : >"$CL_DIR/agent-args"
    make_network
    flock -u 9; exec 9>&-
    make_tls
    make_token
    write_env
    if [[ $with_agents != 0 ]]; then
        make_dataset
        local i
        for ((i = 1; i <= CL_N; i++)); do start_agent "$i"; done
    fi
    trap - EXIT INT TERM
    if [[ ${CLUSTER_OWNER_PID:-} =~ ^[0-9]+$ ]]; then
        # Whoever brought the cluster up may die without calling `down` (a test stopped
        # by its watchdog): a watcher takes the cluster down once that process is gone.
        setsid bash -c 'owner=$1 state=$2 script=$3 dir=$4
            while kill -0 "$owner" 2>/dev/null && [[ -f $state ]]; do sleep 1; done
            if [[ -f $state ]]; then bash "$script" down "$dir"; fi' watcher \
            "$CLUSTER_OWNER_PID" "$CL_STATE" "$SCRIPT_DIR/$PROG" "$CL_DIR" </dev/null >/dev/null 2>&1 &
    fi
    echo "cluster up: $CL_N hosts on 10.213.$CL_X.0/24 (bridge $CL_BRIDGE); env in $CL_DIR/cluster.env"
}

# ns_procs NS...: the live (not zombie) processes inside these namespaces.
ns_procs() {
    local ns p
    for ns in "$@"; do
        for p in $(ip netns pids "$ns" 2>/dev/null || true); do
            if pid_running "$p"; then echo "$p"; fi
        done
    done
}

cmd_down() {
    [[ $# -ge 1 ]] || usage
    set_names "$1"
    local -a nss=() pids=() agents=()
    local ns p f t
    # Every namespace of this cluster, recorded or not.
    mapfile -t nss < <(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NS_PREFIX}[0-9]+$" || true)
    # Agents first (TERM), then every other process inside the namespaces.
    for f in "$CL_DIR"/h*/agent.pid; do
        [[ -f $f ]] || continue
        p=$(cat "$f" 2>/dev/null || true)
        ns=$(basename "$(dirname "$f")"); ns=${NS_PREFIX}${ns#h}
        if [[ $p =~ ^[0-9]+$ ]] && pid_running "$p" \
                && [[ $(ip netns identify "$p" 2>/dev/null) == "$ns" ]]; then
            kill -TERM "$p" 2>/dev/null || true
            agents+=("$p")
        fi
    done
    if ((${#nss[@]} > 0)); then
        for p in $(ns_procs "${nss[@]}"); do kill -TERM "$p" 2>/dev/null || true; done
        for ((t = 0; t < 50; t++)); do
            mapfile -t pids < <(ns_procs "${nss[@]}")
            ((${#pids[@]} == 0)) && break
            sleep 0.1
        done
        if ((${#pids[@]} > 0)); then
            note "down: SIGKILL to ${#pids[@]} process(es) still running 5 s after SIGTERM: ${pids[*]}"
            for ((t = 0; t < 50; t++)); do
                mapfile -t pids < <(ns_procs "${nss[@]}")
                ((${#pids[@]} == 0)) && break
                kill -KILL "${pids[@]}" 2>/dev/null || true
                sleep 0.1
            done
        fi
    fi
    for ns in "${nss[@]}"; do
        ip netns del "$ns" 2>/dev/null || note "down: cannot delete namespace $ns"
    done
    # Root-side veths normally die with their namespace; remove any left, then the bridge.
    local l
    for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' \
            | grep -E "^(${CL_VPREFIX}[0-9]+|${CL_BRIDGE})$" || true); do
        ip link del "$l" 2>/dev/null || true
    done
    for f in /etc/netns/"${NS_PREFIX}"*; do
        if [[ -d $f && $(basename "$f") =~ ^${NS_PREFIX}[0-9]+$ ]]; then rm -rf -- "$f"; fi
    done
    # /etc/netns itself when a cluster created it and nothing else is in it now.
    if [[ -f /etc/netns/$ETC_MARK && -z $(find /etc/netns -mindepth 1 -maxdepth 1 ! -name "$ETC_MARK" -print -quit) ]]; then
        rm -f "/etc/netns/$ETC_MARK"; rmdir /etc/netns 2>/dev/null || true
    fi
    # The agents were children of whoever ran `up`, reparented to init: give it a moment
    # to reap them, so that nothing (not even a zombie) is left when down returns.
    for ((t = 0; t < 30; t++)); do
        local left=0
        for p in "${agents[@]}"; do if [[ -e /proc/$p ]]; then left=1; fi; done
        ((left == 0)) && break
        sleep 0.1
    done
    for f in /sys/fs/cgroup/scalelab-"${CL_ID}"-h* /sys/fs/cgroup/cpu/scalelab-"${CL_ID}"-h*; do
        [[ -d $f ]] && { rmdir "$f" 2>/dev/null || note "down: cannot remove the cgroup $f"; }
    done
    rm -f "$CL_DIR"/h*/agent.pid "$CL_STATE"
    return 0
}

# ---------------------------------------------------------------------------------------
# Faults and shaping.

cmd_cut_restore() {
    local what=$1; shift
    [[ $# -eq 2 ]] || usage
    set_names "$1"; load_state; check_index "$2"
    local v; v=$(veth_name "$2")
    ip link set "$v" "$what" || die "cannot set $v $what"
}

cmd_kill_agent() {
    [[ $# -eq 2 ]] || usage
    set_names "$1"; load_state; check_index "$2"
    agent_alive "$2" || { note "h$2: agent not running"; return 0; }
    local pid; pid=$(cat "$CL_DIR/h$2/agent.pid")
    kill -KILL "$pid" || die "cannot kill $pid"
    local t
    for ((t = 0; t < 50; t++)); do pid_running "$pid" || return 0; sleep 0.1; done
    die "h$2: agent $pid still alive after SIGKILL"
}

cmd_start_agent() {
    [[ $# -eq 2 ]] || usage
    set_names "$1"; load_state; check_index "$2"
    start_agent "$2"
}

# to_us 2ms -> 2000, 0.1ms -> 100, 500us -> 500, 1s -> 1000000
to_us() {
    local v=$1
    [[ $v =~ ^([0-9]+(\.[0-9]+)?)(us|usec|ms|msec|s|sec)?$ ]] || die "bad delay '$v' (e.g. 0.1ms, 2ms, 500us)"
    local num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]:-ms} mul
    case $unit in us | usec) mul=1 ;; ms | msec) mul=1000 ;; s | sec) mul=1000000 ;; esac
    awk -v n="$num" -v m="$mul" 'BEGIN { printf "%d", n * m + 0.5 }'
}

# to_bps 100mbit -> bits/s
to_bps() {
    local v=$1
    [[ $v =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps)$ ]] \
        || die "bad rate '$v' (e.g. 100mbit, 1gbit)"
    local num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]} mul
    case $unit in
        bit) mul=1 ;; kbit) mul=1000 ;; mbit) mul=1000000 ;; gbit) mul=1000000000 ;;
        tbit) mul=1000000000000 ;; bps) mul=8 ;; kbps) mul=8000 ;; mbps) mul=8000000 ;;
        gbps) mul=8000000000 ;;
    esac
    awk -v n="$num" -v m="$mul" 'BEGIN { printf "%.0f", n * m }'
}

# Apply on one device; $@ before the device: command prefix (e.g. ip netns exec NS).
shape_dev() {
    local dev=$1; shift
    local -a pre=("$@")
    "${pre[@]}" tc qdisc del dev "$dev" root 2>/dev/null || true
    [[ -z $SH_RATE && -z $SH_DELAY_US ]] && return 0
    if [[ -n $SH_DELAY_US ]]; then
        # netem carries the delay; the rate goes to netem itself or, where netem's rate is
        # refused, to a tbf under it.
        if [[ -n $SH_RATE ]] && "${pre[@]}" tc qdisc replace dev "$dev" root handle 1: netem \
                delay "${SH_DELAY_US}us" rate "$SH_RATE" limit "$SH_LIMIT_PKTS" 2>/dev/null; then
            return 0
        fi
        "${pre[@]}" tc qdisc replace dev "$dev" root handle 1: netem delay "${SH_DELAY_US}us" \
            limit "$SH_LIMIT_PKTS" || die "tc netem on $dev failed"
        if [[ -n $SH_RATE ]]; then
            "${pre[@]}" tc qdisc replace dev "$dev" parent 1:1 handle 10: tbf rate "$SH_RATE" \
                burst "$SH_BURST" limit "$SH_LIMIT_BYTES" || die "tc tbf under netem on $dev failed"
        fi
    else
        "${pre[@]}" tc qdisc replace dev "$dev" root handle 1: tbf rate "$SH_RATE" \
            burst "$SH_BURST" limit "$SH_LIMIT_BYTES" || die "tc tbf on $dev failed"
    fi
}

cmd_shape() {
    [[ $# -eq 3 ]] || usage
    set_names "$1"; load_state
    local rate=$2 delay=$3
    SH_RATE=""; SH_DELAY_US=""
    if [[ $rate != none ]]; then
        local bps; bps=$(to_bps "$rate")
        SH_RATE=$rate
        # burst: 10 ms at the rate, at least 64 KiB (a GSO super-packet); queue: 100 ms, >= 1 MiB.
        SH_BURST=$(awk -v b="$bps" 'BEGIN { x = b / 8 / 100; if (x < 65536) x = 65536; printf "%d", x }')
        SH_LIMIT_BYTES=$(awk -v b="$bps" 'BEGIN { x = b / 8 / 10; if (x < 1048576) x = 1048576; printf "%d", x }')
    fi
    if [[ $delay != none ]]; then
        local us; us=$(to_us "$delay")
        # Host to host a packet leaves through the sender's eth0 and the receiver's root-side
        # veth: half the delay on each gives DELAY one way (DELAY/2 between console and a host).
        if ((us > 0)); then
            SH_DELAY_US=$(( (us + 1) / 2 ))
            if ! netem_works; then
                note "cannot add delay $delay: tc netem is not available on this kernel ($(uname -r));" \
                    "rate-only shaping works: '$PROG shape DIR RATE none'"
                exit 77
            fi
        fi
    fi
    SH_LIMIT_PKTS=100000
    local i ns
    for ((i = 1; i <= CL_N; i++)); do
        ns=$(ns_name "$i")
        shape_dev "$(veth_name "$i")"
        shape_dev eth0 ip netns exec "$ns"
    done
    if [[ -z $SH_RATE && -z $SH_DELAY_US ]]; then
        echo "shaping removed"
    else
        echo "shaped: rate ${SH_RATE:-unlimited}, one-way host-to-host delay ${delay} on $CL_N hosts"
    fi
}

# ---------------------------------------------------------------------------------------

main() {
    local c=${1:-}
    [[ -n $c ]] || usage
    shift
    case $c in
        check) cmd_check ;;
        check-netem) cmd_check_netem ;;
        up) cmd_up "$@" ;;
        down) cmd_down "$@" ;;
        exec)
            [[ $# -ge 3 ]] || usage
            set_names "$1"; load_state; check_index "$2"
            local i=$2; shift 2
            in_host "$i" "$@" ;;
        cut) cmd_cut_restore down "$@" ;;
        restore) cmd_cut_restore up "$@" ;;
        kill-agent) cmd_kill_agent "$@" ;;
        start-agent) cmd_start_agent "$@" ;;
        shape) cmd_shape "$@" ;;
        env)
            [[ $# -eq 1 ]] || usage
            set_names "$1"
            [[ -f $CL_DIR/cluster.env ]] || die "$CL_DIR/cluster.env missing (no cluster up here)"
            cat "$CL_DIR/cluster.env" ;;
        -h | --help | help) usage ;;
        *) note "unknown command '$c'"; usage ;;
    esac
}

main "$@"
