#!/usr/bin/env bash
# Writes a mesh CA and certificates signed by it, with openssl, for kforge's
# TLS (server.tls in each service's config; README "Security").
#
#   deploy/tls/make-certs.sh DIR NAME [SAN ...]
#
# DIR/ca.crt and DIR/ca.key: the CA, made on first use and kept after (run
# again with other NAMEs to add certificates under the same CA).
# DIR/NAME.crt and DIR/NAME.key: a certificate for NAME (its CN and first
# DNS name) and the extra subject alternative names SAN ("DNS:host" or
# "IP:10.0.0.1"; a bare word is a DNS name, a dotted quad an IP), with both
# the serverAuth and clientAuth usages: each kforge process serves with it
# and presents it to its peers (mutual TLS). ECDSA P-256 keys; certificates
# valid CERT_DAYS days (default 397), the CA CA_DAYS (default 3650).
# Keys are written mode 0600.
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,16p' "$0" >&2
  exit 2
fi
dir=$1
name=$2
shift 2
cert_days=${CERT_DAYS:-397}
ca_days=${CA_DAYS:-3650}
mkdir -p "$dir"
umask 077

if [ ! -f "$dir/ca.crt" ]; then
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" -days "$ca_days" \
    -subj "/CN=kforge mesh CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi

sans="DNS:$name"
for san in "$@"; do
  case $san in
    DNS:*|IP:*) sans="$sans,$san" ;;
    *[!0-9.]*) sans="$sans,DNS:$san" ;;
    *) sans="$sans,IP:$san" ;;
  esac
done

ext=$(mktemp)
trap 'rm -f "$ext" "$dir/$name.csr"' EXIT
cat > "$ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$sans
EXT
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$name" 2>/dev/null
openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
  -CAcreateserial -out "$dir/$name.crt" -days "$cert_days" -sha256 -extfile "$ext" 2>/dev/null
chmod 0644 "$dir/ca.crt" "$dir/$name.crt"
echo "$dir/$name.crt ($sans), signed by $dir/ca.crt"
