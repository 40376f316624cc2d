import { createServer } from "node:net";
import type { AddressInfo } from "node:net";

/**
 * A TCP port on 127.0.0.1 that was free a moment ago (the kernel picks it; the probe is closed
 * before this returns). For a process the test starts on that port; another process can take it
 * in between, so a test that needs the port held throughout listens on it itself.
 */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve, reject) => {
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}
