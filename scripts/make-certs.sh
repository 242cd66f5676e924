#!/usr/bin/env bash
# A self-signed certificate set for a local Shale cluster (docs/replication.md, "TLS"):
#   scripts/make-certs.sh DIR [NODES] [HOST...]
# writes DIR/ca.pem and DIR/ca.key (the cluster's certificate authority, which issues
# replica certificates only) and, for each node id 1..NODES (default 3), DIR/node-<id>.pem
# and DIR/node-<id>.key, valid for localhost, 127.0.0.1 and every HOST given (names or
# IP addresses). Keys are EC P-256, certificates valid for 825 days. Needs openssl(1).
set -euo pipefail
dir="${1:?usage: scripts/make-certs.sh DIR [NODES] [HOST...]}"
nodes="${2:-3}"
shift $(($# < 2 ? $# : 2))
if ! command -v openssl >/dev/null 2>&1; then
    echo "make-certs: openssl is needed (Debian package openssl)" >&2
    exit 1
fi
mkdir -p "$dir"
umask 077
san="DNS:localhost,IP:127.0.0.1"
for host in "$@"; do
    if [[ "$host" =~ ^[0-9.]+$ || "$host" == *:* ]]; then
        san="$san,IP:$host"
    else
        san="$san,DNS:$host"
    fi
done
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
if [ ! -f "$dir/ca.pem" ]; then
    key "$dir/ca.key"
    openssl req -x509 -new -key "$dir/ca.key" -sha256 -days 825 -subj "/CN=shale cluster CA" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -out "$dir/ca.pem"
fi
ext="$(mktemp)"
trap 'rm -f "$ext" "$dir"/*.csr' EXIT
cat >"$ext" <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san
EXT
for id in $(seq 1 "$nodes"); do
    key "$dir/node-$id.key"
    openssl req -new -key "$dir/node-$id.key" -subj "/CN=shale node $id" -out "$dir/node-$id.csr"
    openssl x509 -req -in "$dir/node-$id.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
        -CAcreateserial -days 825 -sha256 -extfile "$ext" -out "$dir/node-$id.pem" 2>/dev/null
done
echo "make-certs: $dir: ca.pem and node-1..$nodes (.pem, .key) for $san" >&2
