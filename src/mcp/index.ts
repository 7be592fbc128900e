/**
 * `contextd/mcp`: an MCP server offering contextd's history tools (search, expand, context,
 * sessions) to any MCP client, over stdio or Streamable HTTP. `contextctl mcp` runs it; embed it in
 * a process of your own with the SDK's transports. The tools themselves are `contextd/tools`.
 */
export { createHistoryServer, SERVER_INFO } from "./history-server.js";
export { serveHttp, MCP_PATH, type HttpServeOptions, type HttpServing } from "./http-server.js";
