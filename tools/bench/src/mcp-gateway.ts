/**
 * `make bench mcp_gateway`: one upstream MCP tool called through WebCodex (`mcp_tool` via
 * call_runtime_tool, on the distributed stack: gateway, tool-registry, audit, ...) against the
 * same upstream called directly by the same kind of client, side by side in one run. The
 * upstream is the test suite's SDK server (test/dist/support/mcp-upstream.js), its own process.
 * Both clients hold one warm session, as the gateway holds one pooled session to the upstream.
 *
 * Two floors put the ratio in scale: the gateway's own (a call_runtime_tool call it answers
 * without the upstream: its MCP layer, pipeline and read audit), and a bare MCP SDK relay
 * (mcp-relay-server.ts: an SDK server forwarding tools/call over one pooled SDK client, nothing
 * else), the least any gateway speaking MCP on both sides costs.
 */
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { findFreeBasePort, startDistributed } from "@webcodex/cli";
import { benchStackOptions, createBenchProject } from "./project.js";
import { startChild, stopChild } from "./stats.js";
import type { BenchResult } from "./stats.js";
import { connect, ratioMetrics } from "./tool-call.js";
import type { PairedLatency, Probe } from "./tool-call.js";

const upstreamScript = fileURLToPath(new URL("../../../test/dist/support/mcp-upstream.js", import.meta.url));
const relayScript = fileURLToPath(new URL("./mcp-relay-server.js", import.meta.url));

export async function benchMcpGateway(o: {
  postgresUrl: string;
  redisUrl: string;
  paired: (a: Probe, b: Probe) => Promise<PairedLatency>;
}): Promise<BenchResult> {
  const upstream = await startChild(process.execPath, [upstreamScript, "/dev/null", "0"], /listening (\S+)/);
  const token = `bench-${randomBytes(12).toString("hex")}`;
  const url = upstream.match[1] as string;
  const relay = await startChild(process.execPath, [relayScript, url, "0"], /LISTENING (\d+)/).catch(async (error: unknown) => {
    await stopChild(upstream.child);
    throw error;
  });
  const options = benchStackOptions(token);
  const stack = await startDistributed({
    basePort: await findFreeBasePort(),
    postgresUrl: o.postgresUrl,
    redisUrl: o.redisUrl,
    projectDir: createBenchProject(),
    ...options,
    gatewayEnv: {
      ...options.gatewayEnv,
      WEBCODEX_MCP_UPSTREAMS: JSON.stringify({ upstreams: [{ id: "bench", url, tenants: ["local"], read_only_tools: ["echo"] }] }),
    },
  });
  try {
    const direct = await connect(url);
    const ours = await connect(stack.mcpUrl, token);
    const described = await ours.callTool({ name: "read_tool_manifest", arguments: { namespace: "mcp:bench", tool: "echo" } });
    const binding = (described.structuredContent as Record<string, unknown> | undefined)?.["binding"];
    if (described.isError || !binding) throw new Error(`mcp_gateway bench: no binding (${JSON.stringify(described.structuredContent)})`);
    const viaGateway = { client: ours, name: "call_runtime_tool", args: { tool: "mcp_tool", arguments: { binding, arguments: { text: "bench" } } } };
    const m = await o.paired({ client: direct, name: "echo", args: { text: "bench" } }, viaGateway);
    // The platform's own floor for the same route: a call_runtime_tool call the gateway answers
    // from its cached upstream tool list (no upstream round trip), beside mcp_tool.
    const floor = await o.paired({ client: ours, name: "call_runtime_tool", args: { tool: "list_tools", arguments: { namespace: "mcp:bench" } } }, viaGateway);
    // The bare relay against the direct call: what MCP on both sides costs by itself.
    const relayed = await connect(`http://127.0.0.1:${relay.match[1] as string}/mcp`);
    const bare = await o.paired({ client: direct, name: "echo", args: { text: "bench" } }, { client: relayed, name: "echo", args: { text: "bench" } });
    await direct.close();
    await ours.close();
    await relayed.close();
    return {
      name: "mcp_gateway",
      metrics: {
        direct_p50_ms: m.a.p50,
        mcp_tool_p50_ms: m.b.p50,
        mcp_tool_p99_ms: m.b.p99,
        ...ratioMetrics(m),
        gateway_floor_p50_ms: floor.a.p50,
        mcp_tool_over_floor_p50_ms: Math.round((floor.b.p50 - floor.a.p50) * 1000) / 1000,
        bare_relay_p50_ms: bare.b.p50,
        bare_relay_ratio_p50: bare.ratio,
      },
      notes:
        "mcp_tool through the distributed stack vs the same upstream tool called directly, both over a warm session (target ratio <= 1.5); gateway_floor: call_runtime_tool answered by the gateway without an upstream round trip, paired with mcp_tool; bare_relay: a bare MCP SDK server forwarding to the upstream over a pooled SDK session, paired with the direct call (the least an MCP-to-MCP gateway adds)",
    };
  } finally {
    await stack.stop();
    await stopChild(relay.child);
    await stopChild(upstream.child);
  }
}
