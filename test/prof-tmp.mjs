import { createClient, createRouterTransport } from "@connectrpc/connect";
import { RunnerService } from "@webcodex/proto";
import { createRunner } from "@webcodex/runner";
import { createLogger } from "@webcodex/platform";
const runner = createRunner({ root: "../examples/sample-project", logger: createLogger({ service: "x", level: "warn" }) });
const args = { files: [{ path: "src/greet.ts" }] };
async function time(label, fn, n = 1000) { for (let i = 0; i < 50; i++) await fn(); const t0 = performance.now(); for (let i = 0; i < n; i++) await fn(); console.log(label, ((performance.now() - t0) / n).toFixed(3), "ms"); }
await time("handler read_files", () => runner.handlers.tools.read_files(args));
const client = createClient(RunnerService, createRouterTransport(runner.routes));
await time("router transport execute", () => client.execute({ callId: "x", tool: "read_files", argumentsJson: JSON.stringify(args), rootIdentity: "" }));
await time("router transport describe", () => client.describe({}));
process.exit(0);
