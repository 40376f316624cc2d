#!/usr/bin/env bash
# Makes sure the tests will have a Postgres and a Redis, by the same rule as
# test/support/backing-services.ts:
# - WEBCODEX_TEST_POSTGRES_URL unset and a Docker engine answers (testcontainers'
#   getContainerRuntimeClient: TESTCONTAINERS_HOST_OVERRIDE, DOCKER_HOST or
#   ~/.testcontainers.properties, /var/run/docker.sock, the rootless sockets): the tests start
#   their own containers, and the local servers are not needed;
# - otherwise they use WEBCODEX_TEST_POSTGRES_URL / WEBCODEX_TEST_REDIS_URL (default: the local
#   servers), which this script starts when they are down and it can.
# With an engine it makes sure the Postgres and Redis images testcontainers starts are there
# (tools/scripts/test-images.sh builds them from Debian packages when no registry serves them).
# Exits non-zero, saying what failed, when the tests would have neither.
set -u
cd "$(dirname "$0")/../.." || exit 1
pg_url="${WEBCODEX_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
redis_url="${WEBCODEX_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
docker_timeout_s="${WEBCODEX_DOCKER_PROBE_TIMEOUT_S:-20}"

# Prints the engine testcontainers found and exits 0; exits 1 when none answers, 2 when
# testcontainers is not installed, 3 when the probe timed out.
docker_engine() { node --input-type=module -e '
  const limit = Number(process.argv[1]) * 1000;
  setTimeout(() => process.exit(3), limit).unref();
  let tc;
  try { tc = await import("testcontainers"); } catch { process.exit(2); }
  try {
    const client = await tc.getContainerRuntimeClient();
    const rt = client.info.containerRuntime;
    console.log(`${rt.serverVersion ? `Docker ${rt.serverVersion}` : "a Docker engine"} (${process.env.DOCKER_HOST ?? rt.remoteSocketPath ?? rt.host})`);
    process.exit(0);
  } catch { process.exit(1); }' "$docker_timeout_s"; }

pg_up() { node -e '
  const net = require("node:net"); const u = new URL(process.argv[1]);
  const s = net.connect(Number(u.port || 5432), u.hostname); s.setTimeout(1500);
  s.on("connect", () => process.exit(0)); s.on("error", () => process.exit(1)); s.on("timeout", () => process.exit(1));' "$pg_url"; }
redis_up() { node -e '
  const net = require("node:net"); const u = new URL(process.argv[1]);
  const s = net.connect(Number(u.port || 6379), u.hostname); s.setTimeout(1500);
  s.on("connect", () => s.write("PING\r\n")); s.on("data", (d) => process.exit(String(d).startsWith("+PONG") ? 0 : 1));
  s.on("error", () => process.exit(1)); s.on("timeout", () => process.exit(1));' "$redis_url"; }

docker_note="WEBCODEX_TEST_POSTGRES_URL is set, so Docker is not used"
hint="start it, or unset WEBCODEX_TEST_POSTGRES_URL to let testcontainers use a Docker engine"
if [ -z "${WEBCODEX_TEST_POSTGRES_URL:-}" ]; then
  docker_note="no Docker engine answers"
  hint="start it, start a Docker engine, or set WEBCODEX_TEST_POSTGRES_URL and WEBCODEX_TEST_REDIS_URL"
  engine="$(docker_engine)"
  case $? in
    0) echo "ensure-services: $engine answers; the tests start Postgres and Redis with testcontainers (local servers not needed)"
       # Their images: present, pulled, or built from Debian packages (no registry needed).
       bash tools/scripts/test-images.sh || { echo "ensure-services: the testcontainers images are missing and could not be made (see above)"; exit 1; }
       exit 0 ;;
    1) ;; # no engine: the local servers
    2) echo "ensure-services: testcontainers is not installed (run npm ci); not looking for a Docker engine" ;;
    3) docker_note="the Docker engine did not answer within ${docker_timeout_s} s"
       echo "ensure-services: $docker_note; using the local servers" ;;
  esac
fi

if ! pg_up; then
  echo "ensure-services: Postgres at $pg_url is down; trying to start the local cluster"
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
    for _ in $(seq 1 30); do pg_up && break; sleep 0.5; done
  else
    echo "ensure-services: no local cluster to start (pg_ctlcluster or /etc/postgresql missing)"
  fi
  pg_up || { echo "ensure-services: Postgres is not reachable at $pg_url and $docker_note ($hint)"; exit 1; }
fi
if ! redis_up; then
  echo "ensure-services: Redis at $redis_url is down; trying to start a local server"
  if command -v redis-server >/dev/null 2>&1; then
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no || true
    for _ in $(seq 1 30); do redis_up && break; sleep 0.5; done
  else
    echo "ensure-services: no redis-server to start"
  fi
  redis_up || { echo "ensure-services: Redis is not reachable at $redis_url and $docker_note ($hint)"; exit 1; }
fi
echo "ensure-services: Postgres and Redis are up"
