/** The processes `webcodex up` starts, in start order: one port each, consecutive from --port. */
export const SERVICES = ["tool-registry", "ref-resolver", "audit", "runner-broker", "gateway", "runner"] as const;
