// tools/chart/images.sh's multistage build against a recording stand-in for the docker CLI: which
// builder it picks for a given CLI, the Node base it passes, and the Dockerfile the legacy
// builder gets. No engine is needed; the images themselves are built by `make images`.
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const here = new URL(".", import.meta.url).pathname;
const root = join(here, "../..");
const dockerfile = readFileSync(join(root, "images/Dockerfile"), "utf8");

let dir;
before(() => {
  dir = mkdtempSync(join(tmpdir(), "wc-images-test-"));
  // The stand-in: `buildx version` works only when FAKE_BUILDX=1; `version` reports FAKE_CLIENT;
  // `build` logs its arguments and DOCKER_BUILDKIT and keeps a copy of the -f file.
  const fake = join(dir, "docker");
  writeFileSync(
    fake,
    `#!/usr/bin/env bash
set -u
case "$1" in
  info) exit 0 ;;
  buildx) [ "\${FAKE_BUILDX:-0}" = 1 ] && { echo "github.com/docker/buildx v0.12.1"; exit 0; }; echo "docker: 'buildx' is not a docker command." >&2; exit 1 ;;
  version) echo "$FAKE_CLIENT"; exit 0 ;;
  image) echo 123000000; exit 0 ;;
  build)
    n=$(ls "$FAKE_LOG" | wc -l)
    printf '%s\\n' "DOCKER_BUILDKIT=\${DOCKER_BUILDKIT:-}" "$@" >"$FAKE_LOG/$n.args"
    printf '%s' "\${NPM_CA:-}" >"$FAKE_LOG/$n.npmca"
    prev=""
    for a in "$@"; do [ "$prev" = -f ] && cp "$a" "$FAKE_LOG/$n.dockerfile"; prev="$a"; done
    exit 0 ;;
esac
echo "unexpected: docker $*" >&2
exit 1
`,
  );
  chmodSync(fake, 0o755);
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** images.sh with the stand-in; each build's argv (first line DOCKER_BUILDKIT=…) and -f file. */
async function images(name, env, services) {
  const log = join(dir, name);
  await run("mkdir", ["-p", log]);
  const { stdout } = await run("bash", [join(here, "images.sh"), ...services], {
    cwd: root,
    env: {
      ...process.env,
      DOCKER: join(dir, "docker"),
      FAKE_LOG: log,
      WEBCODEX_IMAGE_BUILD: "multistage",
      WEBCODEX_NODE_IMAGE: "local/node:24-test",
      WEBCODEX_IMAGE_TAG: "t1",
      ...env,
    },
  });
  const builds = readdirSync(log)
    .filter((f) => f.endsWith(".args"))
    .sort((a, b) => parseInt(a) - parseInt(b))
    .map((f) => {
      const [buildkit, ...args] = readFileSync(join(log, f), "utf8").trimEnd().split("\n");
      const file = (ext) => readFileSync(join(log, f.replace(".args", ext)), "utf8");
      return { buildkit, args, dockerfile: file(".dockerfile"), npmCa: file(".npmca") };
    });
  return { stdout, builds };
}

function arg(args, flag, prefix = "") {
  return args.filter((a, i) => args[i - 1] === flag && a.startsWith(prefix));
}

describe("images.sh multistage", () => {
  test("images/Dockerfile pulls no frontend image and caches npm only under BuildKit", () => {
    assert.doesNotMatch(dockerfile, /^# *syntax=/m, "a syntax line makes BuildKit pull docker/dockerfile from a registry");
    const npmCi = dockerfile.indexOf("RUN --mount=type=cache,target=/root/.npm ");
    assert.ok(npmCi > 0 && dockerfile.indexOf("npm ci", npmCi) > npmCi);
    // npm ci sees only the manifests, so a source change does not re-run it.
    assert.ok(dockerfile.lastIndexOf("COPY --from=manifests", npmCi) > dockerfile.lastIndexOf("FROM ", npmCi));
    assert.ok(dockerfile.indexOf("COPY . .", npmCi) > npmCi);
  });

  test("a docker CLI older than 23 without buildx: the engine's BuildKit, the Dockerfile as it is", async () => {
    const { stdout, builds } = await images("engine", { FAKE_CLIENT: "20.10.24+dfsg1" }, ["gateway", "runner"]);
    assert.match(stdout, /builder: engine, DOCKER_BUILDKIT=1, Node base local\/node:24-test/);
    assert.equal(builds.length, 2);
    for (const b of builds) {
      assert.equal(b.buildkit, "DOCKER_BUILDKIT=1");
      assert.deepEqual(arg(b.args, "--build-arg", "NODE_IMAGE="), ["NODE_IMAGE=local/node:24-test"]);
      assert.equal(b.dockerfile, dockerfile);
    }
    assert.deepEqual(arg(builds[0].args, "--build-arg", "SERVICE="), ["SERVICE=gateway"]);
    assert.deepEqual(arg(builds[1].args, "--target"), ["runner"]);
    assert.deepEqual(arg(builds[1].args, "--build-arg", "SERVICE="), []);
    assert.deepEqual(arg(builds[1].args, "-t"), ["webcodex/runner:t1"]);
  });

  test("WEBCODEX_NPM_CA reaches the builder stage by name, its PEM through the environment", async () => {
    const pem = join(dir, "proxy-ca.pem");
    writeFileSync(pem, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    const { stdout, builds } = await images("npmca", { FAKE_CLIENT: "20.10.24", WEBCODEX_NPM_CA: pem }, ["gateway"]);
    assert.ok(builds[0].args.includes("NPM_CA"));
    assert.equal(builds[0].npmCa, readFileSync(pem, "utf8").trimEnd());
    assert.doesNotMatch(stdout, /BEGIN CERTIFICATE/);
    assert.match(dockerfile, /^ARG NPM_CA=""$/m);
    const builder = dockerfile.slice(dockerfile.indexOf("AS builder"), dockerfile.indexOf("AS runtime-os"));
    assert.match(builder, /ARG NPM_CA/, "only the builder stage declares NPM_CA");
    assert.equal(dockerfile.match(/ARG NPM_CA/g).length, 1);
  });

  test("buildx present: BuildKit whatever the CLI's version", async () => {
    const { builds } = await images("buildx", { FAKE_CLIENT: "28.2.2", FAKE_BUILDX: "1" }, ["audit"]);
    assert.equal(builds[0].buildkit, "DOCKER_BUILDKIT=1");
    assert.equal(builds[0].dockerfile, dockerfile);
  });

  test("a docker CLI 23 or later without buildx: the legacy builder, without the cache mount", async () => {
    const { stdout, builds } = await images("legacy", { FAKE_CLIENT: "28.2.2" }, ["tool-registry", "runner"]);
    assert.match(stdout, /builder: legacy, DOCKER_BUILDKIT=0/);
    for (const b of builds) {
      assert.equal(b.buildkit, "DOCKER_BUILDKIT=0");
      assert.doesNotMatch(b.dockerfile, /^RUN --mount/m);
      assert.equal(b.dockerfile, dockerfile.replace("RUN --mount=type=cache,target=/root/.npm ", "RUN "));
    }
    // The legacy builder builds the service stage on its way to `runner`: it must accept SERVICE=runner.
    assert.deepEqual(arg(builds[1].args, "--build-arg", "SERVICE="), ["SERVICE=runner"]);
    const serviceStage = dockerfile.slice(dockerfile.indexOf("AS service"), dockerfile.indexOf("AS runner"));
    assert.match(serviceStage, /\|runner\) ;;/);
  });

  test("an unknown WEBCODEX_IMAGE_BUILDER is refused", async () => {
    await assert.rejects(images("bad", { FAKE_CLIENT: "28.2.2", WEBCODEX_IMAGE_BUILDER: "kaniko" }, ["audit"]), /must be buildx, engine or legacy/);
  });
});
