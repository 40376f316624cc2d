// Public surface of @webcodex/contracts: pure TypeScript, no I/O.
// For services and the gateway:
export { toolDefinitions, toolDefinition, clampRule, toolLimit } from "./catalog.js";
export type { ToolName, ToolInput, ToolInputSchema } from "./catalog.js";
export type { AgentToolName, GatewayToolName, PresentationToolName, RefResolverToolName, RunnerToolName } from "./tool-names.js";
export { isJournaledTool, JOURNALED_TOOLS } from "./journaled-tools.js";
export type { JournaledToolName } from "./journaled-tools.js";
export type { Schema, Static } from "./json-schema.js";
export { runnerArguments } from "./runner-arguments.js";
export type { GatewayArgument, GatewayArguments, RunnerArguments } from "./runner-arguments.js";
export { renderLimitText, clampText } from "./limit-text.js";
export { ToolCategory, EffectClass, DESCRIPTION_MAX_CHARS } from "./tool-definition.js";
export { BUILTIN_BOOTSTRAP_GUIDANCE_MAX_CHARS, CODE_MODE_GUIDANCE, SKILLS_BOOTSTRAP_HINT } from "./bootstrap.js";
export type { ToolDefinition, DirectPolicy, DirectReason, Risk, Authority, ExecutionForm, ClampRule } from "./tool-definition.js";
export {
  admittedTools,
  gatewayOnlyToolNames,
  gatewayToolsInstruction,
  listedTools,
  toolRoute,
  groupToolNamesByCategory,
  gatewayRefusal,
  isAdmitted,
  mcpToolDescriptor,
  toolAnnotations,
  MCP_ANNOTATION_DEFAULTS,
  serverInstructions,
  toolsListResult,
  TOOLS_LIST_MAX_BYTES,
  ADMISSION_PROFILES,
  modelVisible,
  HOST_PROFILES,
  isAdmissionProfile,
  isHostProfile,
  directPolicy,
  forwardedCall,
  isWithheld,
  withheldTools,
} from "./admission.js";
export {
  parseToolPolicy,
  parseToolPolicyText,
  policyAdmits,
  toolPolicySchema,
  toolPolicySchemaDocument,
  toolPolicyRuleSchema,
  ToolPolicyError,
} from "./tool-policy.js";
export type { ToolPolicy, ToolPolicyRule, ToolPolicySubject } from "./tool-policy.js";
export type { AdmissionContext, AdmissionProfile, GatewayRefusal, HostProfile, Route, ToolAnnotations } from "./admission.js";
export { normalizeToolCall, ToolInputNormalizationCode, normalizationHints, isToolInputNormalizationCode } from "./normalize.js";
export type { CanonicalCall, CanonicalToolInput, NormalizeResult, NormalizeContext, InputNormalization } from "./normalize.js";
export { projectSuccess } from "./projection.js";
export { compactBatch, compactEdit, compactRun, compactShell, compactValidation, pagedText } from "./compaction.js";
export {
  waitForJobFollowUp,
  rereadFollowUp,
  readToolManifestFollowUp,
  listProjectsFollowUp,
  inspectWorkspaceFollowUp,
  readAgentTaskFollowUp,
  listAgentTasksFollowUp,
  waitForAgentEventsFollowUp,
  createSessionFollowUp,
  describeUpstreamToolFollowUp,
  listUpstreamToolsFollowUp,
  waitForProjectFollowUp,
  undoEditFollowUp,
  followUpTarget,
  GATEWAY_WRAPPER,
} from "./follow-up.js";
export type { FollowUp, FollowUpKind } from "./follow-up.js";
export { restartListFollowUp } from "./follow-up.js";
export { pageFields, encodeCursor, decodeCursor, cursorFailure } from "./paging.js";
export type { PagedTool } from "./paging.js";
export { reasonCodeTable, failureFollowUpBuilder } from "./reason-codes.js";
export type { ReasonCodeRow, RetryPosture, FollowUpBuilderName } from "./reason-codes.js";
export { ReasonCode, ToolFailureError, toolFailure, fail, isToolFailureError, reasonCodeFromString } from "./failure.js";
export {
  PipelineStage,
  PipelineSubStage,
  CallOutcome,
  pipelineStageFromString,
  stageTimingKeyFromString,
  callOutcomeFromString,
  callOutcomeOrUnknown,
} from "./pipeline.js";
export type { StageTimingKey, StageTimings, SettledCallOutcome } from "./pipeline.js";
export { failureToWire, failureFromWire } from "./domain-failure.js";
export type { DomainFailureInit } from "./domain-failure.js";
export type { ToolFailure, FailureOptions } from "./failure.js";
export type { Result } from "./result.js";
export { DEFAULT_MODEL_WORKFLOW_POLICY, GOAL_SELECTIONS, modelWorkflowPolicyFrom, UNATTENDED_CONTINUATIONS } from "./workflow-policy.js";
export type { GoalSelection, ModelWorkflowPolicy, UnattendedContinuation } from "./workflow-policy.js";
export { validateToolArguments } from "./schema-validator.js";
export type { SchemaViolation } from "./schema-validator.js";
export {
  RUNNER_PROTOCOL_GENERATION,
  runnerCapabilityCatalog,
  runnerCapabilityWire,
  runnerCapabilityByWire,
  RunnerCapabilities,
  missingCapabilities,
  capabilityMissingFailure,
} from "./capabilities.js";
export type { RunnerCapabilityId, RunnerCapabilityWire, RunnerCapabilityRow } from "./capabilities.js";
// For contract tests and docs generation:
export type { JsonSchema } from "./json-schema.js";
export { sampleToolArgs, sampleToolArgVariants } from "./sample-args.js";
export { repeatedFacts } from "./repeated-facts.js";
export { followUpBuilders } from "./follow-up.js";
export { renderToolsDoc } from "./tools-doc.js";
export { renderResultsDoc } from "./results-doc.js";
export { canonicalProjectId, isCanonicalIdPart, isCanonicalProjectId, parseCanonicalProjectId } from "./project-id.js";
export { CODE_CELL_TOOL, cellCallable, cellToolNames, cellDeclaration, schemaType } from "./code-mode.js";
export {
  JOB_STATE,
  LIVE_JOB_STATES,
  TERMINAL_JOB_STATES,
  RUNNER_JOB_STATES,
  OBSERVED_LIVE_JOB_STATES,
  isTerminalJobState,
  jobRecordTerminal,
} from "./job-states.js";
export type { JobState, LiveJobState, TerminalJobState, RunnerJobState } from "./job-states.js";
