#!/usr/bin/env bash
# Makes sure the Postgres and Redis the integration tests use are up. With a Docker engine
# the tests start their own containers (testcontainers) and this only reports. Without one
# they use WEBCODEX_TEST_POSTGRES_URL / WEBCODEX_TEST_REDIS_URL (default: the local servers),
# which this script starts when they are down and it can.
set -u
pg_url="${WEBCODEX_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
redis_url="${WEBCODEX_TEST_REDIS_URL:-redis://127.0.0.1:6379}"

pg_up() { node -e '
  const net = require("node:net"); const u = new URL(process.argv[1]);
  const s = net.connect(Number(u.port || 5432), u.hostname); s.setTimeout(1500);
  s.on("connect", () => process.exit(0)); s.on("error", () => process.exit(1)); s.on("timeout", () => process.exit(1));' "$pg_url"; }
redis_up() { node -e '
  const net = require("node:net"); const u = new URL(process.argv[1]);
  const s = net.connect(Number(u.port || 6379), u.hostname); s.setTimeout(1500);
  s.on("connect", () => s.write("PING\r\n")); s.on("data", (d) => process.exit(String(d).startsWith("+PONG") ? 0 : 1));
  s.on("error", () => process.exit(1)); s.on("timeout", () => process.exit(1));' "$redis_url"; }

if ! pg_up; then
  echo "ensure-services: Postgres at $pg_url is down; trying to start the local cluster"
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
    for _ in $(seq 1 30); do pg_up && break; sleep 0.5; done
  fi
  pg_up || { echo "ensure-services: Postgres is not reachable at $pg_url (set WEBCODEX_TEST_POSTGRES_URL)"; exit 1; }
fi
if ! redis_up; then
  echo "ensure-services: Redis at $redis_url is down; trying to start a local server"
  if command -v redis-server >/dev/null 2>&1; then
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no || true
    for _ in $(seq 1 30); do redis_up && break; sleep 0.5; done
  fi
  redis_up || { echo "ensure-services: Redis is not reachable at $redis_url (set WEBCODEX_TEST_REDIS_URL)"; exit 1; }
fi
echo "ensure-services: Postgres and Redis are up"
