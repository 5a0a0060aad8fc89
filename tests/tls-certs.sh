#!/usr/bin/env bash
# tests/tls-certs.sh DIR - a throwaway CA and a server certificate it signed, for the packaged bindings'
# rediss:// checks (packaging/test-wheel.sh, tests/node/package.test.js); the core's TLS tests make their
# own (tests/core/tls_redis.hpp). Writes DIR/ca.crt, DIR/server.crt and DIR/server.key: EC P-256, valid two
# days, the server's SAN DNS:localhost and IP:127.0.0.1. Our own openssl.cnf, so that the system's (or
# OPENSSL_CONF) adds nothing; OpenSSL 3 wants CA:TRUE and keyCertSign on the CA and serverAuth on the server.
set -euo pipefail
dir=${1:?usage: tests/tls-certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
cat > openssl.cnf <<'CNF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
CNF
export OPENSSL_CONF=$PWD/openssl.cnf
ssl() { openssl "$@" 2>>openssl.log || { cat openssl.log >&2; echo "tls-certs: openssl $1 failed" >&2; exit 1; }; }
ssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -config openssl.cnf \
  -subj "/O=floodwall tests/CN=floodwall test CA" -extensions ca_ext -keyout ca.key -out ca.crt
ssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -config openssl.cnf \
  -subj "/O=floodwall tests/CN=localhost" -keyout server.key -out server.csr
ssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -set_serial 2 -days 2 -extfile openssl.cnf \
  -extensions server_ext -out server.crt
rm -f server.csr
