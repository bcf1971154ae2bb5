#!/usr/bin/env bash
# make-secrets.sh [NAMESPACE [DIR]]: the token, a CA and the agents' certificate for
# packaging/kubernetes, written to DIR (default packaging/kubernetes/secrets/: kustomization.yaml's
# secretGenerator reads them). The certificate names every agent pod
# (scalelab-agent-N.scalelab-agents for N < SCALELAB_AGENT_REPLICAS, default 16, and
# *.scalelab-agents.NAMESPACE.svc[.cluster.local]) and the Service.
# Clients need secrets/ca.crt (SCALELAB_TLS_CA) and the token; reaching agents by address
# (--agents dns:scalelab-agents:7450), they also set SCALELAB_TLS_SERVER_NAME=scalelab-agents.
set -euo pipefail
ns=${1:-scalelab}
dir=${2:-$(cd "$(dirname "$0")" && pwd)/secrets}
mkdir -p "$dir" && chmod 700 "$dir"
command -v openssl >/dev/null || { echo "make-secrets.sh: openssl missing" >&2; exit 1; }
if [[ -e $dir/tls.key ]]; then echo "make-secrets.sh: $dir already holds secrets; remove it first" >&2; exit 1; fi
(umask 077 && openssl rand -hex 32 >"$dir/token")
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 365 \
    -subj "/CN=ScaleLab agents CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
# Short pod names one by one: TLS clients take no wildcard with a single label after it.
san="DNS:scalelab-agents,DNS:scalelab-agents.$ns.svc,DNS:*.scalelab-agents.$ns.svc"
san+=",DNS:*.scalelab-agents.$ns.svc.cluster.local"
for ((i = 0; i < ${SCALELAB_AGENT_REPLICAS:-16}; i++)); do san+=",DNS:scalelab-agent-$i.scalelab-agents"; done
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=scalelab-agents" \
    -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 365 -sha256 \
    -extfile <(printf '%s\n' "subjectAltName=$san" "extendedKeyUsage=serverAuth") -out "$dir/tls.crt" 2>/dev/null
rm -f "$dir/tls.csr"
chmod 600 "$dir"/*.key "$dir/token"
echo "wrote $dir: token, ca.crt (give it to clients), tls.crt/tls.key (the agents'), ca.key (keep it safe)"
