#!/usr/bin/env bash
# packaging/tls-redis.sh DIR - a throwaway redis-server speaking TLS, for the packaged bindings' rediss://
# checks (packaging/test-wheel.sh, packaging/test-ruby.sh): certificates from tests/tls-certs.sh in
# DIR/certs (the client verifies the server against DIR/certs/ca.crt), a plain port for the caller's own
# redis-cli and a TLS port, both on 127.0.0.1. Prints "PLAIN_PORT TLS_PORT" once Redis answers; the
# server runs in the background until the caller kills the pid in DIR/redis.pid.
set -euo pipefail
dir=${1:?usage: packaging/tls-redis.sh DIR}
cd "$(dirname "$0")/.."
mkdir -p "$dir"
bash tests/tls-certs.sh "$dir/certs"
read -r plain tls < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
for s in socks:
    s.close()')
redis-server --port "$plain" --bind 127.0.0.1 --tls-port "$tls" --tls-cert-file "$dir/certs/server.crt" \
  --tls-key-file "$dir/certs/server.key" --tls-ca-cert-file "$dir/certs/ca.crt" --tls-auth-clients no \
  --save '' --appendonly no --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" >&2
for _ in $(seq 100); do
  if [ "$(redis-cli -p "$plain" ping 2>/dev/null)" = PONG ] && [ -s "$dir/redis.pid" ]; then
    echo "$plain $tls"
    exit 0
  fi
  sleep 0.1
done
cat "$dir/redis.log" >&2
echo "tls-redis: redis-server did not answer on port $plain" >&2
exit 1
