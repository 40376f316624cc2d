// Public surface of @webcodex/platform: plumbing shared by every service.
export { readConfig, ConfigError } from "./config.js";
export type { Env, ConfigSpec, ConfigOf } from "./config.js";
export { createLogger } from "./logger.js";
export type { Logger, LogLevel, LoggerOptions } from "./logger.js";
export { createMetrics } from "./metrics.js";
export type { Metrics, Counter, Histogram } from "./metrics.js";
export { principalHeaders, principalFromHeaders, RUNNER_TOKEN_HEADER } from "./principal.js";
export type { Principal } from "./principal.js";
export { startServiceServer, sendJson, onShutdown, readinessFrom, serverRuntimeOptions } from "./server.js";
export { createHealthService } from "./grpc-health.js";
export { createReflectionService } from "./grpc-reflection.js";
export type { HealthOptions } from "./grpc-health.js";
export { afterAnswer } from "./answer-hooks.js";
export type { AfterAnswer, AnswerFate } from "./answer-hooks.js";
export type { ServiceServer, ServiceServerOptions, ReadinessReport, HttpHandler, NodeRequest, NodeResponse } from "./server.js";
export { createPostgresDatabase, describePostgresFailure, runMigrations } from "./database.js";
export type { Database, Queryable, QueryResult, Migration, PostgresOptions } from "./database.js";
export { createPgliteDatabase } from "./pglite.js";
export type { PgliteDatabase, PgliteMemory } from "./pglite.js";
export { createRedis } from "./redis.js";
export type { Redis } from "./redis.js";
export { startTelemetry } from "./telemetry.js";
export type { Telemetry } from "./telemetry.js";
export { createInProcessClient } from "./in-process-client.js";
export type { InProcessClientOptions } from "./in-process-client.js";
export { argumentShape, measureCanonical, measureProjection, measureResult } from "./telemetry.js";
export type { ArgumentShapeSketch, ShapeSchema, ResultSizes } from "./telemetry.js";
export { createWorkMetrics } from "./metrics.js";
export type { Gauge, WorkMetrics } from "./metrics.js";
export {
  createTracingClientInterceptor,
  createTracingServerInterceptor,
  runServerSpan,
  withSpan,
  withLinkedSpan,
  activeSpanContext,
  extractTraceContext,
  traceContextFromMeta,
} from "./tracing.js";
export type { TracingOptions } from "./tracing.js";
export { sealSecretEnvironment, isSecretEnvName } from "./sealed-env.js";
export type { SealedEnvironment } from "./sealed-env.js";
export {
  createServiceIdentity,
  serviceIdentityFromEnv,
  defaultBindHost,
  serviceCallerKey,
  serviceKeyProblem,
  SERVICE_TOKEN_HEADER,
  SERVICE_KEY_ENV,
  MIN_SERVICE_KEY_LENGTH,
} from "./service-identity.js";
export type { ServiceIdentity } from "./service-identity.js";
export { createServiceTransport, provenNotSent } from "./service-transport.js";
export { createUnaryH2Client } from "./unary-h2-client.js";
export type { UnaryH2ClientOptions } from "./unary-h2-client.js";
export { servedWithFastPath } from "./unary-h2-server.js";
export type { UnaryFastPath } from "./unary-h2-server.js";
export type { ServiceTransportOptions } from "./service-transport.js";
export { mintRouteCredential, verifyRouteCredential, ROUTE_CREDENTIAL_HEADER } from "./route-credential.js";
export type { RouteGrant } from "./route-credential.js";
export { humanLine, logFormatFor, logWriter } from "./log-format.js";
export type { LogFormat } from "./log-format.js";
export { connectCodeName, connectCodeFromName } from "./connect-code.js";
export type { ConnectCodeName } from "./connect-code.js";
