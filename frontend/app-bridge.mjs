// The host side of MCP Apps' postMessage protocol: the official `app-bridge` of
// @modelcontextprotocol/ext-apps (package-lock.json), bundled by build.mjs into one classic
// script that hands it to static/js/mcp_apps.js. Nothing else is in it.
import { AppBridge } from "@modelcontextprotocol/ext-apps/app-bridge";

window.McpAppBridge = { AppBridge };
