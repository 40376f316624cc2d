export { createGateway } from "./gateway.js";
export type { Gateway, GatewayDeps } from "./gateway.js";
export { createStaticTokenAuthenticator, parseDevTokensFile, bearerToken } from "./auth.js";
export type { Authenticator, Caller, StaticTokenEntry } from "./auth.js";
export { createPipeline } from "./pipeline.js";
export type { Pipeline, ModelResult } from "./pipeline.js";
export { SERVER_INSTRUCTIONS } from "./mcp/mcp-server.js";
export { main, httpReadinessProbe, devTokenEntries } from "./main.js";
