// A minimal MCP Apps host for the browser tests (tests/e2e/test_mcp_app_cards.py), built from the
// official host side (`@modelcontextprotocol/ext-apps/app-bridge`) and bundled by the test itself:
// it renders a `ui://` resource's HTML in a sandboxed iframe (scripts only, an opaque origin: not
// Tessera's, not this page's), sends it the host context, the tool's input and its result, and
// records what the View asks of it. Test-only: never served by Tessera.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

window.hostLog = { links: [], calls: [], sizes: [] };
const contexts = {};

window.renderCard = async ({ html, tool, input, result, theme, slot, serverCalls }) => {
  const iframe = document.createElement("iframe");
  iframe.setAttribute("sandbox", "allow-scripts");
  iframe.title = `${tool.title || tool.name} (MCP App)`;
  iframe.dataset.testid = `view-${slot}`;
  document.getElementById(slot).append(iframe);
  const context = {
    theme,
    toolInfo: { id: 1, tool },
    displayMode: "inline",
    availableDisplayModes: ["inline"],
    platform: "web",
    containerDimensions: { maxHeight: 2000 },
  };
  const bridge = new AppBridge(
    null,
    { name: "Test host", version: "1.0" },
    { openLinks: {}, serverTools: {}, logging: {} },
    { hostContext: context },
  );
  contexts[slot] = context;
  bridge.onsizechange = ({ height }) => {
    window.hostLog.sizes.push(height);
    if (height) iframe.style.height = `${height}px`;
  };
  bridge.onopenlink = async ({ url }) => {
    window.hostLog.links.push(url);
    return {};
  };
  // The View's own calls: answered from what the test fetched through Tessera's /mcp.
  bridge.oncalltool = async (params) => {
    window.hostLog.calls.push(params);
    const answer = (serverCalls || {})[params.name];
    if (!answer) throw new Error(`No such tool here: ${params.name}`);
    return answer;
  };
  const initialized = new Promise((resolve) => {
    bridge.oninitialized = resolve;
  });
  // Listening before the document loads, so its `ui/initialize` is not missed.
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.srcdoc = html;
  await initialized;
  await bridge.sendToolInput({ arguments: input });
  if (result) await bridge.sendToolResult(result);
  window[`bridge_${slot}`] = bridge;
  return true;
};

window.sendResult = async (slot, result) => window[`bridge_${slot}`].sendToolResult(result);
window.setTheme = async (slot, theme) => {
  contexts[slot] = { ...contexts[slot], theme };
  window[`bridge_${slot}`].setHostContext(contexts[slot]);
};
