/**
 * The tools the gateway runs itself (execution "gateway"): discovery (list_tools,
 * read_tool_manifest), get_runtime_status, and the Project lifecycle.
 */
import type { Client } from "@connectrpc/connect";
import type { RefResolverService, RunnerBrokerService } from "@webcodex/proto";
import {
  CODE_CELL_TOOL,
  cellDeclaration,
  PipelineStage,
  groupToolNamesByCategory,
  inspectWorkspaceFollowUp,
  modelVisible,
  ReasonCode,
  toolDefinition,
  toolFailure,
  toolRoute,
} from "@webcodex/contracts";
import type { GatewayToolName, HostProfile, ToolDefinition, ToolInput } from "@webcodex/contracts";
import { principalHeaders } from "@webcodex/platform";
import type { Logger } from "@webcodex/platform";
import type { AuditRecorder } from "../audit-recorder.js";
import { dependencyFailure } from "../call-context.js";
import type { CallContext, Outcome } from "../call-context.js";
import { createProjectLifecycle } from "./project-lifecycle.js";
import type { RunnerStates } from "./runner-states.js";
import { createUpstreamTools } from "../upstream/upstream-tools.js";
import type { UpstreamTools } from "../upstream/upstream-tools.js";

export interface GatewayToolsDeps {
  refResolver: Client<typeof RefResolverService>;
  broker: Client<typeof RunnerBrokerService>;
  /** Its backlog is reported by get_runtime_status. */
  audit: Pick<AuditRecorder, "backlog">;
  hostProfile: HostProfile;
  serverInfo: { name: string; version: string; mode: "embedded" | "distributed" };
  logger: Logger;
  runnerStates: RunnerStates;
  /** Upstream MCP servers (namespaces mcp:<server>, mcp_tool); absent: none configured. */
  upstreamTools?: UpstreamTools | undefined;
}

/**
 * The gateway tools their own modules run before this dispatch: the skills (skills/), the Code
 * Mode cell (code-mode/), present_work_result (presentation.ts), and call_runtime_tool, which
 * admission unwraps into the call it forwards.
 */
export const RUN_BEFORE_DISPATCH = [
  "list_skills",
  "read_skill",
  "run_code_cell",
  "present_work_result",
  "call_runtime_tool",
] as const satisfies readonly GatewayToolName[];

/**
 * A handler for every gateway tool this dispatch runs, keyed by the catalog's names and taking
 * that tool's arguments typed from its input schema: a gateway tool added to the catalog, or a
 * handler removed, does not compile. (The function type is written out here: behind a generic
 * alias tsc would compare two tools' handlers by the alias's measured variance, not their
 * arguments.)
 */
export type GatewayToolHandlers = {
  [N in Exclude<GatewayToolName, (typeof RUN_BEFORE_DISPATCH)[number]>]: (args: ToolInput<N>, ctx: CallContext) => Promise<Outcome>;
};

/** A handler called with a normalized call's arguments (validated against the tool's input schema). */
type WireHandler = (args: Record<string, unknown>, ctx: CallContext) => Promise<Outcome>;

export function createGatewayTools(deps: GatewayToolsDeps) {
  const lifecycle = createProjectLifecycle(deps);

  const noUpstreams = createUpstreamTools({ upstreams: [], refResolver: deps.refResolver, logger: deps.logger });
  const upstream = () => deps.upstreamTools ?? noUpstreams;

  const handlers: GatewayToolHandlers = {
    async list_tools(args, ctx) {
      if (args.namespace !== undefined) return upstream().listTools({ ...args, namespace: args.namespace }, ctx);
      if (args.cursor !== undefined)
        return {
          ok: false,
          failure: toolFailure(ReasonCode.invalidValue, PipelineStage.normalization, {
            detail_code: "cursor_without_namespace",
            evidence: { field: "/cursor" },
          }),
        };
      // App-only card helpers are not part of the model's discovery.
      const admitted = [...ctx.catalog.admitted.values()].filter(modelVisible);
      const groups = groupToolNamesByCategory(admitted);
      // The schema's enum has already rejected an unknown category; a known one may be empty.
      const category = args.category;
      const namespaces = upstream().namespaces(ctx.caller);
      const withNamespaces = namespaces.length > 0 ? { namespaces } : {};
      if (category !== undefined) return { ok: true, result: { categories: groups[category] ? { [category]: groups[category] } : {}, ...withNamespaces } };
      return { ok: true, result: { categories: groups, ...withNamespaces } };
    },
    async read_tool_manifest(args, ctx) {
      if (args.namespace !== undefined) return upstream().readManifest({ ...args, namespace: args.namespace }, ctx);
      const name = args.tool;
      const admittedTarget = ctx.catalog.admitted.get(name);
      const target = admittedTarget && modelVisible(admittedTarget) ? admittedTarget : undefined;
      if (!target) {
        // A tool the operator's policy withholds from this caller is an unknown name to them.
        const known = toolDefinition(name) !== undefined && ctx.catalog.withheld?.has(name) !== true;
        return {
          ok: false,
          failure: toolFailure(known ? ReasonCode.toolNotAdmitted : ReasonCode.unknownTool, PipelineStage.admission, {
            detail_code: known ? "not_admitted" : "unknown_tool",
            evidence: { field: "/tool" },
            message: known ? "This tool is not admitted for you; see list_tools." : "No tool has this name; see list_tools.",
          }),
        };
      }
      const host = ctx.caller.hostProfile ?? deps.hostProfile;
      // Code Mode: the cell's API as TypeScript, generated from the caller's admitted catalog.
      const declaration = target.name === CODE_CELL_TOOL ? { declaration: cellDeclaration(ctx.catalog.admitted.values()) } : {};
      return {
        ok: true,
        result: {
          tool: target.name,
          category: target.category,
          description: target.description,
          input_schema: target.inputSchema,
          route: toolRoute(target, host),
          ...declaration,
        },
      };
    },
    mcp_tool: (args, ctx) => upstream().callTool(args, ctx),
    get_runtime_status: (args, ctx) => runtimeStatus(args, ctx),
    create_project: (args, ctx) => lifecycle.createProject(args, ctx),
    wait_for_project_ready: (args, ctx) => lifecycle.waitForProjectReady(args, ctx),
    delete_project: (args, ctx) => lifecycle.deleteProject(args, ctx),
  };

  /**
   * Runs a gateway tool's handler with the call's normalized arguments: the one place they are
   * taken as the tool's ToolInput (normalizeToolCall validated them against its input schema).
   */
  async function runOnGateway(def: ToolDefinition, args: Record<string, unknown>, ctx: CallContext): Promise<Outcome> {
    const handler = Object.hasOwn(handlers, def.name) ? (handlers[def.name as keyof GatewayToolHandlers] as WireHandler) : undefined;
    if (!handler) return { ok: false, failure: toolFailure(ReasonCode.internal, PipelineStage.dispatch, { detail_code: "no_gateway_handler" }) };
    return handler(args, ctx);
  }

  /**
   * get_runtime_status: projected from the broker's canonical fleet summary (one counting
   * path for both modes). Compact asks the broker for the summary only, so no Runner row is
   * built; compact: false adds the diagnostic rows, catalog version and audit backlog.
   */
  async function runtimeStatus(args: ToolInput<"get_runtime_status">, ctx: CallContext): Promise<Outcome> {
    const compact = args.summary_only === true || args.compact !== false;
    let fleet;
    try {
      fleet = await deps.broker.getFleetStatus(
        { clientId: ctx.caller.principal.clientId, summaryOnly: compact },
        { signal: ctx.signal, headers: principalHeaders(ctx.caller.principal) },
      );
    } catch (error) {
      return { ok: false, failure: dependencyFailure(error, PipelineStage.dispatch, false) };
    }
    const s = fleet.summary;
    const jobs = s?.jobs;
    const status: Record<string, unknown> = {
      server: deps.serverInfo,
      host_profile: ctx.caller.hostProfile ?? deps.hostProfile,
      runners: { total: s?.runnersTotal ?? 0, connected: s?.runnersConnected ?? 0, lost: s?.runnersLost ?? 0, standby: s?.runnersStandby ?? 0 },
      projects: { total: s?.projectsTotal ?? 0, routable: s?.projectsRoutable ?? 0 },
      jobs: {
        active: jobs?.active ?? 0,
        running: jobs?.running ?? 0,
        queued: jobs?.queued ?? 0,
        recovering: jobs?.recovering ?? 0,
        lost_after_reconcile: jobs?.lostAfterReconcile ?? 0,
      },
      protocol: { server_generation: s?.serverProtocolGeneration ?? 0, generations: s?.protocolGenerations ?? [], aligned: s?.protocolAligned ?? true },
      build: { builds: s?.builds ?? [], aligned: s?.buildAligned ?? true },
      connection_states: { ...(s?.connectionStates ?? {}) },
      concurrency: { project_limit: s?.projectConcurrencyLimit ?? 0, in_flight: s?.inFlight ?? 0 },
    };
    if ((s?.baselineFaults ?? 0) > 0) status["baseline_faults"] = s?.baselineFaults;
    const modes = s?.containmentModes ?? {};
    if (Object.keys(modes).length > 0) status["containment"] = { modes: { ...modes }, separate_job_uid: s?.separateJobUidRunners ?? 0 };
    // Write transactions cut off by a Runner crash and finished by its start-up recovery: per
    // Project, how many, and the call that lists each one's call_id, outcome and paths.
    const recovered = Object.entries(s?.recoveredWrites ?? {}).sort(([a], [b]) => a.localeCompare(b));
    if (recovered.length > 0)
      status["recovered_writes"] = recovered.map(([project, count]) => ({ project, count, follow_up: inspectWorkspaceFollowUp(project) }));
    if (compact) return { ok: true, result: status };
    status["runner_details"] = fleet.runners.map((r) => ({
      runner_id: r.runnerId,
      project_id: r.projectId,
      project_canonical_id: r.projectCanonicalId,
      connection_state: r.connectionState,
      protocol_generation: r.protocolGeneration,
      build: r.build,
      capabilities: r.capabilities,
      baseline_complete: r.baselineComplete,
      lease_held: r.leaseHeld,
      fence: Number(r.fence),
      in_flight: r.inFlight,
      last_heartbeat: new Date(Number(r.lastHeartbeatUnixMs)).toISOString(),
      ...(r.containment === "" ? {} : { containment: r.containment, separate_job_uid: r.separateJobUid }),
      ...(r.sandbox === "" ? {} : { sandbox: r.sandbox }),
    }));
    status["catalog_version"] = ctx.catalog.version;
    status["audit_backlog"] = deps.audit.backlog();
    return { ok: true, result: status };
  }

  return { runOnGateway, handled: Object.keys(handlers) };
}
