// webcodex-test: alone (a request flood measures latency and RSS)
/**
 * The request flood (test/support/flood.ts) on `webcodex up`, as root with up's default data
 * dir and two tenants: 4 callers of tenant acme send 400,000-key and 4M-deep requests to up's
 * gateway for 3 s while tenant globex pings it. Every flood request is refused by its shape
 * (413) before it is parsed and the gateway process's RSS comes back within 20% of where it
 * started, globex's ping p99 stays under 100 ms (the rest of each refused body is read at a
 * bounded rate shared by all of them), and a batch within the cap is still served.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { detectSandbox } from "@webcodex/runner";
import { startRootUp, upServicePid } from "../support/index.js";
import type { RootUp } from "../support/index.js";
import { floodWhilePinging, postRaw, rssOf } from "../support/flood.js";

const asRoot = process.getuid?.() === 0;
const sandbox = detectSandbox();
const skip = !asRoot ? "needs root (the mode under test)" : sandbox.available ? false : `no sandbox here: ${sandbox.problem}`;
const secret = (label: string) => `${label}-${randomBytes(12).toString("hex")}`;

describe("a request flood against webcodex up's gateway (root, default data dir, two tenants)", { skip, timeout: 300_000 }, () => {
  let stack: RootUp;
  const flooder = secret("flooder");
  const other = secret("other");

  before(async () => {
    stack = await startRootUp([
      { token: flooder, client_id: "acme", subject: "flooder" },
      { token: other, client_id: "globex", subject: "someone" },
    ]);
  });

  after(async () => {
    await stack?.close();
  });

  it("4 callers sending 400,000-key and 4M-deep requests are refused; another tenant's ping p99 stays under 100 ms and the gateway's RSS comes back", async () => {
    const gateway = upServicePid(stack.up, "gateway");
    await floodWhilePinging({
      label: "webcodex up, gateway process",
      mcpUrl: stack.up.mcpUrl,
      floodToken: flooder,
      pingToken: other,
      rss: () => rssOf(gateway),
    });
    // The flooder is not shut out by the flood itself: a batch within the cap is still served.
    const small = await postRaw(stack.up.mcpUrl, flooder, JSON.stringify(Array.from({ length: 3 }, (_, id) => ({ jsonrpc: "2.0", id, method: "ping" }))));
    assert.equal(small.status, 200, small.text.slice(0, 300));
    assert.equal((JSON.parse(small.text) as unknown[]).length, 3);
  });
});
