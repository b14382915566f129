// MCP Apps host (docs/admin-guide/mcp-apps.md): a tool card's View, run in a sandbox proxy on another
// origin (toolsets/mcp/app_sandbox.py), spoken to with the official app-bridge of
// @modelcontextprotocol/ext-apps (vendor/mcp-apps/app-bridge.js, loaded only when a card has an
// app). What a View asks of Tessera goes to chat/mcp_apps.py, which checks it against the card's
// chat; an "ask" tool's call waits there for the chat's approval card, shown under the View
// (chat/app_asking.py). A message is sent as the user's (mcp_apps/message.js, on the card first
// where the admin says so); a link or a download is asked in Tessera's own dialog
// (mcp_apps/confirm.js). The View cannot reach or draw over any of these.
//
// Parts, each a classic script loaded before this one (templates/base.html): mcp_apps/confirm.js,
// mcp_apps/transport.js (the bridge's transport, with the flood guard), mcp_apps/message.js.
//
// A shared page (data-mcp-apps-display-only) shows the View with the shown result, and answers
// every request from it with a refusal.
(() => {
  "use strict";

  const apps = window.TesseraMcpApps || {};
  const { confirmInPage, SandboxTransport } = apps;
  const script = document.currentScript;
  const BRIDGE_SRC = script ? script.dataset.bridge : "";
  const HOST = { name: "Tessera", version: "1.0" };
  const MIN_HEIGHT = 48;
  const MAX_HEIGHT = 2000;
  const INLINE_MAX_HEIGHT = 640;
  // Requests relayed to Tessera at once per View; more are refused, not queued.
  const IN_FLIGHT = 4;
  const mounted = new Set();
  // Boxes whose View was stopped (a flood, its own teardown): never started again in this page,
  // though the box stays (hx-preserve keeps it through the card's swaps) to say why.
  const ended = new WeakSet();
  let loading = null;

  const loadBridge = () => {
    if (window.McpAppBridge) return Promise.resolve(window.McpAppBridge);
    if (!loading) {
      loading = new Promise((resolve, reject) => {
        const tag = document.createElement("script");
        tag.src = BRIDGE_SRC;
        tag.onload = () => (window.McpAppBridge ? resolve(window.McpAppBridge) : reject(new Error("no bridge")));
        tag.onerror = () => reject(new Error("The app bridge could not be loaded."));
        document.head.appendChild(tag);
      });
    }
    return loading;
  };

  const csrf = () => {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (err) {
      return "";
    }
  };

  const theme = () => {
    const chosen = document.documentElement.dataset.theme;
    if (chosen === "light" || chosen === "dark") return chosen;
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  };

  const styles = () => {
    const css = getComputedStyle(document.documentElement);
    const pick = (name) => css.getPropertyValue(name).trim() || undefined;
    return {
      variables: {
        "--color-background-primary": pick("--surface"),
        "--color-background-secondary": pick("--bg-soft"),
        "--color-text-primary": pick("--text"),
        "--color-text-secondary": pick("--text-soft"),
        "--color-border-primary": pick("--border"),
        "--font-sans": pick("--font"),
        "--font-mono": pick("--mono"),
        "--border-radius-md": pick("--radius"),
      },
    };
  };

  const post = async (url, body) => {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
      body: JSON.stringify(body),
    });
    let data = {};
    try {
      data = await response.json();
    } catch (err) {
      data = { error: "Tessera did not answer." };
    }
    return { status: response.status, data };
  };

  const textOf = (content) =>
    (Array.isArray(content) ? content : [])
      .filter((block) => block && block.type === "text" && typeof block.text === "string")
      .map((block) => block.text)
      .join("\n")
      .trim();

  // What the card says of its call (chat/_tool_card.html): status, input so far, execution, why it ended.
  const stateOf = (box) => {
    const holder = document.querySelector(`[data-mcp-app-state="${CSS.escape(box.id)}"]`);
    if (!holder) return null;
    try {
      return JSON.parse(holder.dataset.state);
    } catch (err) {
      return null;
    }
  };

  async function mount(box) {
    mounted.add(box);
    const root = box.closest("[data-mcp-apps]");
    const note = box.querySelector("[data-mcp-app-note]");
    const place = box.querySelector("[data-mcp-app-frame]");
    const fullButton = box.querySelector("[data-mcp-app-fullscreen]");
    const say = (text) => {
      if (note) {
        note.textContent = text;
        note.hidden = !text;
      }
    };
    let current = stateOf(box);
    if (!root || !place || !current) {
      // Not in its place yet (a swap under way): tried again at the next change of the page.
      mounted.delete(box);
      return;
    }
    const displayOnly = root.hasAttribute("data-mcp-apps-display-only");
    const forCall = (id) => (id ? `${root.dataset.mcpApps}${id}/` : "");
    // Requests from the View go to its call's endpoints, once the call exists.
    let base = forCall(current.execution_id);
    const source =
      base ||
      (root.dataset.chat && !displayOnly
        ? `${root.dataset.mcpApps}chat/${root.dataset.chat}/${encodeURIComponent(current.tool)}/`
        : "");
    let app;
    try {
      if (!source) throw new Error("The app is not available.");
      const response = await fetch(source, { credentials: "same-origin", headers: { Accept: "application/json" } });
      app = await response.json();
      if (!response.ok) throw new Error(app.error || "The app is not available.");
    } catch (err) {
      say(err.message || "The app is not available.");
      return;
    }
    let Bridge;
    try {
      Bridge = (await loadBridge()).AppBridge;
    } catch (err) {
      say(err.message);
      return;
    }
    const frame = document.createElement("iframe");
    frame.className = "mcp-app-frame";
    frame.setAttribute("sandbox", app.sandbox.sandbox);
    if (app.sandbox.allow) frame.setAttribute("allow", app.sandbox.allow);
    frame.setAttribute("title", `${app.tool.title} (an app from ${app.server})`);
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.dataset.testid = "mcp-app-frame";
    frame.style.height = "160px";
    if (app.prefers_border === false) box.classList.add("is-borderless");

    let mode = "inline";
    let inFlight = 0;
    const dimensions = () =>
      mode === "fullscreen"
        ? { width: place.clientWidth, height: place.clientHeight }
        : { width: place.clientWidth, maxHeight: INLINE_MAX_HEIGHT };
    const context = () => ({
      theme: theme(),
      styles: styles(),
      displayMode: mode,
      availableDisplayModes: ["inline", "fullscreen"],
      containerDimensions: dimensions(),
      locale: navigator.language || "en",
      timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
      userAgent: "Tessera",
      platform: window.matchMedia("(pointer: coarse)").matches ? "mobile" : "web",
      deviceCapabilities: { touch: navigator.maxTouchPoints > 0, hover: window.matchMedia("(hover: hover)").matches },
      toolInfo: { tool: app.tool },
    });
    const capabilities = displayOnly
      ? { sandbox: { csp: app.sandbox.csp } }
      : {
          openLinks: {},
          downloadFile: {},
          serverTools: {},
          serverResources: {},
          logging: {},
          message: { text: {} },
          updateModelContext: { text: {}, structuredContent: {} },
          sandbox: { csp: app.sandbox.csp },
        };
    const bridge = new Bridge(null, HOST, capabilities, { hostContext: context() });
    // A View stopped mid-request (a flood, a teardown) leaves answers with nowhere to go.
    bridge.onerror = (err) => console.warn("[MCP app]", err && err.message);
    let live = true;
    const observers = [];
    // Host notifications to a View: none once it is stopped (the bridge is closed by then).
    const notify = (send) => {
      if (!live) return;
      try {
        Promise.resolve(send()).catch((err) => console.warn("[MCP app]", err && err.message));
      } catch (err) {
        console.warn("[MCP app]", err && err.message);
      }
    };
    const stop = (reason) => {
      if (live && initialized && !sent.result && !sent.cancelled) {
        // Its card went away before the call ended (Stop while the model wrote it).
        notify(() => bridge.sendToolCancelled({ reason: "The call was stopped before it ran." }));
      }
      live = false;
      observers.forEach((observer) => observer.disconnect());
      mounted.delete(box);
      if (reason) {
        ended.add(box);
        // Nothing left to show full screen: the card goes back to its place in the chat.
        if (mode === "fullscreen") setMode("inline");
        if (fullButton) fullButton.hidden = true;
      }
      bridge.close().catch(() => {});
      frame.remove();
      say(reason);
    };
    const transport = new SandboxTransport(frame, app.sandbox.origin, () =>
      stop("This app sent too many messages and was stopped."),
    );
    const relay = async (what, work) => {
      if (displayOnly) throw new Error("This is a shared page: the app is display-only.");
      if (!base) throw new Error("The tool call has not run yet.");
      if (inFlight >= IN_FLIGHT) throw new Error("Too many requests at once.");
      inFlight += 1;
      try {
        return await work();
      } finally {
        inFlight -= 1;
      }
    };
    const setMode = (next) => {
      if (next === mode) return;
      mode = next;
      box.classList.toggle("is-fullscreen", mode === "fullscreen");
      document.documentElement.classList.toggle("has-fullscreen-app", mode === "fullscreen");
      if (fullButton) {
        fullButton.setAttribute("aria-pressed", String(mode === "fullscreen"));
        fullButton.textContent = mode === "fullscreen" ? "Exit full screen" : "Full screen";
      }
      if (mode === "fullscreen") frame.style.height = "";
      notify(() => bridge.sendHostContextChange({ displayMode: mode, containerDimensions: dimensions() }));
    };

    bridge.onsandboxready = () => {
      notify(() => bridge.sendSandboxResourceReady({ html: app.html, csp: app.sandbox.csp }));
    };
    // The call as the card tells it, pushed once the View is ready: its input while the model
    // writes it (tool-input-partial), then whole (tool-input), then its result (tool-result), or
    // why it has none (tool-cancelled: stopped, refused, denied or failed before a result).
    let initialized = false;
    const sent = { partial: "", input: false, result: false, cancelled: false };
    let result = app.result;
    const push = async () => {
      if (!initialized || !live) return;
      const state = current;
      if (state.status === "pending") {
        const partial = JSON.stringify(state.input || {});
        if (state.input && partial !== sent.partial) {
          sent.partial = partial;
          notify(() => bridge.sendToolInputPartial({ arguments: state.input }));
        }
        return;
      }
      if (!sent.input) {
        sent.input = true;
        notify(() => bridge.sendToolInput({ arguments: state.input || app.input || {} }));
      }
      if (state.status === "success" && !sent.result) {
        sent.result = true;
        if (!result && base) {
          try {
            const response = await fetch(base, { credentials: "same-origin", headers: { Accept: "application/json" } });
            result = (await response.json()).result;
          } catch (err) {
            result = null;
          }
        }
        if (result) notify(() => bridge.sendToolResult(result));
      } else if ((state.status === "error" || state.status === "cancelled") && !sent.cancelled) {
        sent.cancelled = true;
        notify(() => bridge.sendToolCancelled({ reason: state.reason || "Stopped" }));
      }
    };
    const update = () => {
      const state = stateOf(box);
      if (!state) return;
      if (state.execution_id && !base) base = forCall(state.execution_id);
      current = state;
      push();
    };
    bridge.oninitialized = () => {
      say("");
      initialized = true;
      update();
    };
    bridge.onsizechange = ({ height }) => {
      if (mode === "inline" && typeof height === "number" && isFinite(height)) {
        frame.style.height = `${Math.max(MIN_HEIGHT, Math.min(MAX_HEIGHT, Math.ceil(height)))}px`;
      }
    };
    bridge.onrequestdisplaymode = async ({ mode: wanted }) => {
      const offered = (bridge.getAppCapabilities() || {}).availableDisplayModes;
      if ((wanted === "inline" || wanted === "fullscreen") && (!offered || offered.includes(wanted))) setMode(wanted);
      return { mode };
    };
    bridge.onloggingmessage = (params) => console.debug("[MCP app]", params);
    bridge.onrequestteardown = () => stop("The app closed.");
    bridge.oncalltool = (params) =>
      relay("call", async () => {
        // An "ask" tool's call waits on the server for the chat's approval card (under the View).
        const answer = await post(base + "call/", { name: params.name, arguments: params.arguments || {} });
        if (answer.status !== 200) throw new Error(answer.data.error || "The call was refused.");
        return answer.data;
      });
    bridge.onreadresource = (params) =>
      relay("read", async () => {
        const answer = await post(base + "read/", { uri: params.uri });
        if (answer.status !== 200) throw new Error(answer.data.error || "The read was refused.");
        return answer.data;
      });
    bridge.onupdatemodelcontext = (params) =>
      relay("context", async () => {
        const answer = await post(base + "context/", params || {});
        if (answer.status !== 200) throw new Error(answer.data.error || "The update was refused.");
        return {};
      });
    bridge.onmessage = (params) =>
      relay("message", async () => {
        const sent = await apps.sendMessage({
          text: textOf(params.content),
          confirm: app.confirm_messages === true,
          server: app.server,
          asks: box.querySelector("[data-mcp-app-asks]"),
          beforeSend: () => {
            if (document.documentElement.classList.contains("has-fullscreen-app")) setMode("inline");
          },
        });
        return sent ? {} : { isError: true };
      });
    bridge.onopenlink = (params) =>
      relay("link", async () => {
        let url;
        try {
          url = new URL(params.url);
        } catch (err) {
          return { isError: true };
        }
        if (url.protocol !== "https:" && url.protocol !== "http:") return { isError: true };
        const allowed = await confirmInPage("Open a link from the app?", `${app.server}'s app wants to open ${url.href}`, "Open");
        if (!allowed) return { isError: true };
        window.open(url.href, "_blank", "noopener,noreferrer");
        return {};
      });
    bridge.ondownloadfile = (params) =>
      relay("download", async () => {
        const files = (params.contents || []).filter((item) => item && item.type === "resource" && item.resource);
        if (!files.length) return { isError: true };
        for (const item of files.slice(0, 5)) {
          const resource = item.resource;
          const name = String(resource.uri || "download").split("/").pop().slice(0, 100) || "download";
          const allowed = await confirmInPage("Save a file from the app?", `${app.server}'s app wants to save “${name}”.`, "Save");
          if (!allowed) return { isError: true };
          const bytes =
            typeof resource.blob === "string"
              ? Uint8Array.from(atob(resource.blob), (c) => c.charCodeAt(0))
              : new TextEncoder().encode(String(resource.text || ""));
          const link = document.createElement("a");
          link.href = URL.createObjectURL(new Blob([bytes], { type: "application/octet-stream" }));
          link.download = name;
          link.click();
          setTimeout(() => URL.revokeObjectURL(link.href), 10000);
        }
        return {};
      });

    try {
      await bridge.connect(transport);
    } catch (err) {
      say("The app could not be started.");
      return;
    }
    frame.src = app.sandbox.url;
    place.appendChild(frame);
    say("Loading the app…");
    if (fullButton) {
      fullButton.hidden = false;
      fullButton.onclick = () => setMode(mode === "fullscreen" ? "inline" : "fullscreen");
    }
    box.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && mode === "fullscreen") setMode("inline");
    });
    const themed = new MutationObserver(() =>
      notify(() => bridge.sendHostContextChange({ theme: theme(), styles: styles(), containerDimensions: dimensions() })),
    );
    themed.observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
    observers.push(themed);
    if (window.ResizeObserver) {
      const sized = new ResizeObserver(() => notify(() => bridge.sendHostContextChange({ containerDimensions: dimensions() })));
      sized.observe(place);
      observers.push(sized);
    }
    box.mcpApp = { bridge, stop, update };
  }

  const scan = () => {
    document.querySelectorAll("[data-mcp-app]").forEach((box) => {
      if (!mounted.has(box) && !ended.has(box)) mount(box);
    });
    mounted.forEach((box) => {
      if (!box.mcpApp) return;
      if (!document.contains(box)) box.mcpApp.stop("");
      else box.mcpApp.update();
    });
  };

  let pending = false;
  const soon = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      scan();
    });
  };
  // What a View asks, pushed to every tab of the chat (chat/app_asking.py), marked with the id
  // it goes into: a tab that does not show that (another branch, a page loaded since) drops it.
  const ASK = /^<!--app-ask ([\w-]+)-->/;
  document.addEventListener("htmx:wsBeforeMessage", (event) => {
    const found = ASK.exec((event.detail && event.detail.message) || "");
    if (found && !document.getElementById(found[1])) event.preventDefault();
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", scan);
  else scan();
  // Cards arrive over the socket and by htmx swaps: whatever adds one, it is mounted.
  new MutationObserver(soon).observe(document.documentElement, { childList: true, subtree: true });
})();
