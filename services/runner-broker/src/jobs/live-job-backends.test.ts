import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createMemoryLiveJobBackend } from "./live-job-backends.js";
import type { LiveJob } from "./job-store.js";

const job = (fence: number): LiveJob => ({
  projectCanonicalId: "agent:c:p",
  jobId: "j1",
  clientId: "c",
  runnerId: "r1",
  tool: "run_shell",
  fence,
  state: "running",
  createdAtMs: 0,
  updatedAtMs: 0,
});

describe("live job state (in-process)", () => {
  it("refuses writes with a lower fence and lets a higher fence adopt the job", async () => {
    let t = 0;
    const live = createMemoryLiveJobBackend({ now: () => t });
    assert.deepEqual(await live.put(job(5), 100), { ok: true, adopted: false });
    assert.deepEqual(await live.update(job(5), 4, { state: "recovering" }, 100, t), { ok: false, reason: "stale_fence", fence: 5 });
    assert.deepEqual(await live.update(job(5), 6, { state: "recovering", runnerId: "r2" }, 100, t), { ok: true, adopted: true });
    assert.equal((await live.get(job(5)))?.runnerId, "r2");
    await live.remove(job(5), 5);
    assert.ok(await live.get(job(5)), "a stale owner cannot drop the adopted job");
    t = 101;
    assert.deepEqual(await live.exists([job(5)]), [false], "the live state expires with its lease");
  });
});
