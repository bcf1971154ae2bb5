#!/usr/bin/env bash
# fresh-root-install.sh: install the ScaleLab .debs into a fresh Debian 12 root and use them.
#
#   fresh-root-install.sh check                      exit 0 if it can run here, else 77 + why
#   fresh-root-install.sh ROOT AGENT.deb CONSOLE.deb
#
# Makes ROOT with `debootstrap --variant=minbase bookworm` (from the mirror of this
# machine's apt sources, default deb.debian.org), then, inside it, in private mount and
# PID namespaces (its /proc goes, and every process it started dies, when it ends):
# `apt-get install ./x.deb` resolves the dependencies; the installed agent is started on
# loopback and the installed CLI runs a 1-epoch synthetic run against it. Prints what it
# checks; exit 0 only when all of it worked. ROOT is left for the caller to remove.
set -euo pipefail
PROG=$(basename "$0")
die() { echo "$PROG: $*" >&2; exit 1; }

check() {
    [[ $(id -u) == 0 ]] || { echo "not root (debootstrap and chroot need root)"; exit 77; }
    local c
    for c in debootstrap unshare chroot; do
        command -v "$c" >/dev/null || { echo "$c missing (apt-get install debootstrap util-linux)"; exit 77; }
    done
    exit 0
}

[[ ${1:-} != check ]] || check
[[ $# -eq 3 ]] || die "usage: $PROG ROOT AGENT.deb CONSOLE.deb"
root=$1 agent_deb=$2 console_deb=$3
[[ -f $agent_deb && -f $console_deb ]] || die "no such package: $agent_deb or $console_deb"
why=$(check 2>&1) || die "cannot run here: $why"
mirror=${SCALELAB_DEBIAN_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)}
mirror=${mirror:-http://deb.debian.org/debian}

echo "== debootstrap bookworm from $mirror"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 \
    || { tail -n 20 "$root.debootstrap.log" >&2; die "debootstrap failed (log: $root.debootstrap.log)"; }
cp "$agent_deb" "$console_deb" "$root/tmp/"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

# Everything below runs in the fresh root.
cat >"$root/tmp/inside.sh" <<'INSIDE'
set -eu
export DEBIAN_FRONTEND=noninteractive
echo "== apt-get install ./scalelab-agent*.deb ./scalelab_*.deb"
apt-get update -qq
apt-get install -y -qq --no-install-recommends /tmp/scalelab-agent_*.deb /tmp/scalelab_*.deb >/tmp/apt.log 2>&1 \
    || { tail -n 30 /tmp/apt.log; exit 1; }
dpkg-query -W -f='${Package} ${Version} ${Status}\n' scalelab-agent scalelab
getent passwd scalelab >/dev/null && echo "system user scalelab: made by postinst"
test -f /etc/scalelab/agent.conf && echo "conffile /etc/scalelab/agent.conf: present"
for b in /usr/bin/scalelab /usr/bin/scalelab-cli /usr/bin/scalelab-agent /usr/bin/scalelab-worker; do
    if ldd "$b" | grep -q "not found"; then ldd "$b" | grep "not found"; echo "$b: libraries missing"; exit 1; fi
done
echo "every program finds its libraries"
mkdir -p /tmp/data /tmp/state
scalelab-agent --port 7459 --data-dir /tmp/data --state-dir /tmp/state >/tmp/agent.log 2>&1 &
for i in $(seq 50); do grep -q "listening on" /tmp/agent.log && break; sleep 0.2; done
head -n 1 /tmp/agent.log
echo "== scalelab-cli run against the installed agent"
scalelab-cli run --agent 127.0.0.1:7459 --synthetic --synthetic-train 256 --synthetic-test 64 --epochs 1
echo "== the installed console"
QT_QPA_PLATFORM=offscreen scalelab --version
INSIDE
echo "== in the fresh root"
unshare --mount --pid --fork --mount-proc="$root/proc" chroot "$root" /bin/sh /tmp/inside.sh
