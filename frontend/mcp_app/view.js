// The View of Tessera's cards as MCP Apps (hub/mcp_apps.py serves it as `ui://tessera/…`
// resources): the View side of the official `@modelcontextprotocol/ext-apps` package, bundled by
// frontend/build.mjs into one classic script that the resource's HTML carries inline, so the
// document fetches nothing and runs under a default-deny CSP.
//
// Why the card arrives as HTML: Tessera renders a tool's result into its card on the server, from
// the same Django partials (templates/components/) and the same sanitizer (nh3, chat/components/
// renderer.py) as its own page. Re-implementing six card types in JavaScript would let the two drift
// apart; here the View only places the server's card (in the result's `_meta["tessera/card"]`),
// follows the host's theme and asks the host to open links. A result without a card (an error,
// an MCP toolset's own content) is shown as its text.
import { App, applyDocumentTheme } from "@modelcontextprotocol/ext-apps";

const CARD_KEY = "tessera/card";
const POLL_MS = 2500;

const root = document.getElementById("card");
const status = document.getElementById("status");
const app = new App({ name: "Tessera cards", version: "1.0" }, { availableDisplayModes: ["inline"] });
let done = false;
let arguments_ = null;
let polling = null;

function say(text) {
  status.textContent = text;
}

function followTheme(context) {
  if (context && (context.theme === "light" || context.theme === "dark")) applyDocumentTheme(context.theme);
}

function asksApproval() {
  // tools/list marks a tool that waits for the owner's approval when this caller calls it.
  const tool = app.getHostContext()?.toolInfo?.tool;
  return Boolean(tool && tool._meta && tool._meta["tessera/asks"]);
}

function place(html) {
  // Tessera's server rendered and sanitized this card (autoescaped partials, then nh3 with the
  // partials' own allow-list): no script, no handlers, only http(s) links.
  root.innerHTML = html;
}

function plainText(result) {
  const parts = [];
  for (const block of result.content || []) {
    if (block && block.type === "text") parts.push(block.text);
    else if (block && block.type === "resource_link") parts.push(`${block.title || block.name}: ${block.uri}`);
  }
  return parts.join("\n\n");
}

function showResult(result) {
  done = true;
  stopPolling();
  const card = result && result._meta ? result._meta[CARD_KEY] : null;
  if (card && typeof card.html === "string" && card.html) {
    place(card.html);
    say("");
    return;
  }
  const box = document.createElement("div");
  box.className = "gen-ui";
  const body = document.createElement("div");
  body.className = result && result.isError ? "gu-card view-error" : "gu-card";
  const text = document.createElement("pre");
  text.className = "view-text";
  text.textContent = plainText(result || {}) || "The tool returned nothing to show.";
  body.append(text);
  box.append(body);
  root.replaceChildren(box);
  say("");
}

async function checkApproval() {
  // While the call waits for the owner's approval, what is being approved and where to answer:
  // an app-only tool of Tessera's (never offered to a model) finds this user's waiting request.
  if (done || arguments_ === null) return;
  const name = app.getHostContext()?.toolInfo?.tool?.name;
  try {
    const found = await app.callServerTool({
      name: "tessera__approval_card",
      arguments: { tool: name || "", arguments: arguments_ },
    });
    const card = found && found._meta ? found._meta[CARD_KEY] : null;
    if (!done && card && typeof card.html === "string" && card.html) {
      place(card.html);
      say("Waiting for your approval in Tessera.");
    }
  } catch (error) {
    // A host that does not pass a View's calls on: the card keeps saying the call is running.
    stopPolling();
  }
}

function stopPolling() {
  if (polling !== null) clearInterval(polling);
  polling = null;
}

app.ontoolinput = (params) => {
  arguments_ = params.arguments || {};
  say("Running…");
  if (asksApproval()) {
    checkApproval();
    polling = setInterval(checkApproval, POLL_MS);
  }
};
app.ontoolresult = showResult;
app.ontoolcancelled = () => {
  done = true;
  stopPolling();
  say("The call was stopped.");
};
app.onhostcontextchanged = followTheme;
app.onteardown = async () => {
  stopPolling();
  return {};
};

// Links open through the host (`ui/open-link`): a sandboxed View may not open windows itself,
// and the host decides how (and whether) to open them.
document.addEventListener("click", (event) => {
  const link = event.target instanceof Element ? event.target.closest("a[href]") : null;
  if (!link) return;
  event.preventDefault();
  app.openLink({ url: link.href }).catch(() => say("The host did not open the link."));
});

say("Waiting for the result…");
app.connect().then(
  () => followTheme(app.getHostContext()),
  () => say("This card needs an MCP Apps host."),
);
