/**
 * Where a clone may go: the repository's host is resolved once, every address it resolves to
 * must be public (not loopback, link-local, private, shared, cluster, multicast or reserved),
 * unless the operator allow-lists the host; git is then pinned to the address checked.
 * Every refusal has the same detail code and is decided before any connection, so refusals
 * tell nothing about what listens on the refused address.
 */
import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";
import { PipelineStage, ReasonCode, toolFailure } from "@webcodex/contracts";
import type { ToolFailure } from "@webcodex/contracts";

const blocked = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  blocked.addSubnet(net, prefix, "ipv4");
}
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["64:ff9b::", 96],
  ["100::", 64],
  ["2001:db8::", 32],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
] as const) {
  blocked.addSubnet(net, prefix, "ipv6");
}

/** True when `address` (an IP literal) is on a range a clone must not reach. */
export function isNonPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, "ipv4");
  if (family !== 6) return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return blocked.check(mapped[1]!, "ipv4");
  return blocked.check(address, "ipv6");
}

export const cloneTargetRefused = (): ToolFailure =>
  toolFailure(ReasonCode.invalidValue, PipelineStage.normalization, {
    detail_code: "clone_target_not_allowed",
    evidence: { field: "/source/git/url" },
    message: "That repository's address is on a local or private network; only an operator can allow cloning from it.",
  });

const unreachable = (): ToolFailure =>
  toolFailure(ReasonCode.cloneFailed, PipelineStage.execution, {
    detail_code: "repository_unreachable",
    message: "The repository could not be reached at this URL.",
  });

/**
 * The URL git is given (git:// rewritten to the address checked) and, for http(s), the
 * `http.curloptResolve` entry pinning the host to it; or the refusal.
 */
export async function resolveCloneTarget(rawUrl: string, allowHosts: readonly string[]): Promise<{ url: string; pin?: string } | { failure: ToolFailure }> {
  const url = new URL(rawUrl);
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  let addresses: string[];
  if (isIP(host) !== 0) addresses = [host];
  else {
    try {
      addresses = (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
    } catch {
      return { failure: unreachable() };
    }
  }
  if (addresses.length === 0) return { failure: unreachable() };
  const allowed = allowHosts.includes(host) || addresses.every((a) => allowHosts.includes(a.toLowerCase()));
  if (!allowed && addresses.some(isNonPublicAddress)) return { failure: cloneTargetRefused() };
  const address = addresses[0]!;
  const literal = isIP(address) === 6 ? `[${address}]` : address;
  if (url.protocol === "git:") {
    if (isIP(host) === 0) url.hostname = literal;
    return { url: url.toString() };
  }
  if (isIP(host) !== 0) return { url: rawUrl };
  const port = url.port !== "" ? url.port : url.protocol === "https:" ? "443" : "80";
  return { url: rawUrl, pin: `${host}:${port}:${literal}` };
}
