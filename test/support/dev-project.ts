/** A project served by `webcodex dev` with a connected MCP client: the setup most e2e suites share. */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { connectMcp, firstProjectRef } from "./mcp.js";
import { createProjectDir, startDevServer, tempDir } from "./processes.js";
import type { DevServer } from "./processes.js";

export interface DevProject {
  readonly projectDir: string;
  /** The server's data dir (its PGlite database is readable once the server stopped). */
  readonly dataDir: string;
  readonly server: DevServer;
  readonly client: Client;
  /** The project's ref from list_projects. */
  readonly project: string;
  /** Closes the client and stops the server. */
  close(): Promise<void>;
}

export interface DevProjectOptions {
  name: string;
  /** Extra environment for `webcodex dev` (and so its local Runner). */
  env?: Record<string, string>;
  /** Runs on the committed project directory before the server starts. */
  prepare?: (projectDir: string) => void;
}

export async function openDevProject(files: Record<string, string>, options: DevProjectOptions): Promise<DevProject> {
  const projectDir = createProjectDir(files, { name: options.name });
  options.prepare?.(projectDir);
  const dataDir = tempDir("wcx-data-");
  const server = await startDevServer({ projectDir, dataDir, ...(options.env ? { env: options.env } : {}) });
  const client = await connectMcp(server.mcpUrl, server.token);
  return {
    projectDir,
    dataDir,
    server,
    client,
    project: await firstProjectRef(client),
    close: async () => {
      await client.close();
      await server.stop();
    },
  };
}
