import type { GatewayTestHooks } from "@webcodex/gateway";

/** The services `webcodex serve` starts, each loaded only when started (the gateway takes test hooks from a test launcher only). */
type ServiceModule = { main: (env: typeof process.env, testHooks?: GatewayTestHooks) => Promise<void> };

export const SERVICE_MAINS: Record<string, () => Promise<ServiceModule>> = {
  gateway: () => import("@webcodex/gateway"),
  "tool-registry": () => import("@webcodex/tool-registry"),
  "ref-resolver": () => import("@webcodex/ref-resolver"),
  audit: () => import("@webcodex/audit"),
  "runner-broker": () => import("@webcodex/runner-broker"),
};

/** What starts the process `webcodex runner` or `webcodex serve <service>` names, or undefined for any other command line. */
export function serviceLoader(command: string | undefined, service: string | undefined): (() => Promise<ServiceModule>) | undefined {
  if (command === "runner") return () => import("@webcodex/runner");
  if (command === "serve" && service !== undefined && Object.hasOwn(SERVICE_MAINS, service)) return SERVICE_MAINS[service];
  return undefined;
}
