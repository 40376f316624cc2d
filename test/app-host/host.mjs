// A minimal MCP Apps Host for the card tests, bundled for the browser by the test: an MCP
// client that declares the Apps extension, and AppBridge mounting each card in a sandboxed
// iframe (scripts only; no same-origin, no forms, no popups). window.host is driven by the test.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { AppBridge, PostMessageTransport, getToolUiResourceUri, isToolVisibilityAppOnly } from "@modelcontextprotocol/ext-apps/app-bridge";

const UI = "io.modelcontextprotocol/ui";
const MIME = "text/html;profile=mcp-app";
let client;
let tools = [];

window.host = {
  /** Every ui/message a card sent, in order. */
  messages: [],
  /** When true the Host fails every ui/message (an error answer instead of acceptance). */
  failMessages: false,
  async connect(token, { apps = true } = {}) {
    client = new Client({ name: "webcodex-test-host", version: "1.0.0" }, { capabilities: apps ? { extensions: { [UI]: { mimeTypes: [MIME] } } } : {} });
    await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", location.href), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    tools = (await client.listTools()).tools;
    return { tools: tools.map((t) => ({ name: t.name, meta: t._meta ?? null })), bytes: JSON.stringify({ tools }).length };
  },
  /** The tools a model would see: the Host keeps app-only helpers away from it. */
  modelToolNames: () => tools.filter((t) => !isToolVisibilityAppOnly(t)).map((t) => t.name),
  async listResources() {
    return (await client.listResources()).resources;
  },
  async readResource(uri) {
    return (await client.readResource({ uri })).contents;
  },
  async callTool(name, args) {
    const r = await client.callTool({ name, arguments: args });
    return { isError: r.isError === true, result: r.structuredContent ?? {}, text: r.content?.[0]?.text ?? "" };
  },
  /** Calls a present_* tool as the model would, then mounts its card with the result. */
  async present(name, args, slot) {
    const result = await client.callTool({ name, arguments: args });
    const tool = tools.find((t) => t.name === name);
    const uri = getToolUiResourceUri(tool);
    const [content] = (await client.readResource({ uri })).contents;
    const frame = document.createElement("iframe");
    frame.id = slot;
    frame.setAttribute("sandbox", "allow-scripts");
    frame.style.cssText = "width:560px;height:300px;border:1px solid #ccc;display:block;margin:8px;background:#fff";
    document.body.append(frame);
    const bridge = new AppBridge(client, { name: "webcodex-test-host", version: "1.0.0" }, { serverTools: {}, message: { text: {} } });
    bridge.onmessage = async (params) => {
      window.host.messages.push(params);
      if (window.host.failMessages) throw new Error("the Host could not deliver the message");
      return {};
    };
    // Cards report their content size; the frame follows it, as a real Host does.
    bridge.onsizechange = ({ height }) => {
      if (typeof height === "number" && height > 0) frame.style.height = `${Math.ceil(height) + 2}px`;
    };
    bridge.oninitialized = () => {
      void bridge.sendToolInput({ arguments: args });
      void bridge.sendToolResult(result);
    };
    await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
    frame.srcdoc = content.text;
    return {
      isError: result.isError === true,
      result: result.structuredContent ?? {},
      text: result.content?.[0]?.text ?? "",
      mimeType: content.mimeType,
      uiMeta: content._meta?.ui ?? null,
    };
  },
};
document.title = "host ready";
