// Artifacts (docs/user-guide/artifacts.md): the panel beside the chat. A version is shown in a
// frame of the MCP Apps sandbox proxy (toolsets/mcp/app_sandbox.py), on an origin that is never
// Tessera's: the page hands the proxy the document's HTML and listens to nothing it says back
// but "ready". The panel's HTML comes from the server (artifacts/_panel.html), for the chat's
// owner (versions, editor, download) and for a shared chat (display-only) alike.
(() => {
  "use strict";

  const panel = document.getElementById("artifact-panel");
  if (!panel) return;
  const base = panel.dataset.artifactsBase;
  const remembered = "tessera-artifact:" + location.pathname;
  const seen = new Set();
  let mermaid = null;
  let listening = null;
  let loadId = 0;
  let opener = null;

  const theme = () => {
    const chosen = document.documentElement.dataset.theme;
    if (chosen === "light" || chosen === "dark") return chosen;
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  };

  const mermaidSource = (url) => {
    if (!mermaid) {
      mermaid = fetch(url, { credentials: "same-origin" }).then((r) => {
        if (!r.ok) throw new Error("The diagram library could not be loaded.");
        return r.text();
      });
      mermaid.catch(() => (mermaid = null));
    }
    return mermaid;
  };

  const note = (holder, text) => {
    holder.replaceChildren();
    const p = document.createElement("p");
    p.className = "tc-note";
    p.textContent = text;
    holder.appendChild(p);
  };

  const mount = async (view) => {
    const holder = view.querySelector("[data-artifact-frame]");
    const url = view.dataset.sandboxUrl;
    const origin = view.dataset.sandboxOrigin;
    if (!holder || !url || !origin) return;
    const mine = ++loadId;
    let html;
    try {
      const response = await fetch(`${view.dataset.base}document?v=${view.dataset.version}&theme=${theme()}`, {
        credentials: "same-origin",
      });
      if (!response.ok) throw new Error("The artifact could not be loaded.");
      const doc = await response.json();
      html = doc.html;
      if (doc.mermaid) {
        const code = (await mermaidSource(view.dataset.mermaid)).replace(/<\/script/gi, "<\\/script");
        html = html.replace("<!--tessera:mermaid-->", () => `<script>${code}</script>`);
      }
    } catch (err) {
      if (mine === loadId) note(holder, err.message || "The artifact could not be loaded.");
      return;
    }
    if (mine !== loadId) return;
    const frame = document.createElement("iframe");
    frame.setAttribute("sandbox", "allow-scripts allow-same-origin");
    frame.setAttribute("title", "Artifact: " + (view.querySelector("h2") || {}).textContent);
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.dataset.testid = "artifact-frame";
    if (listening) window.removeEventListener("message", listening);
    listening = (event) => {
      if (event.source !== frame.contentWindow || event.origin !== origin) return;
      const data = event.data;
      if (data && data.jsonrpc === "2.0" && data.method === "ui/notifications/sandbox-proxy-ready") {
        frame.contentWindow.postMessage(
          { jsonrpc: "2.0", method: "ui/notifications/sandbox-resource-ready", params: { html } },
          origin,
        );
      }
      // Anything else the document says is not listened to: it asks nothing of Tessera.
    };
    window.addEventListener("message", listening);
    frame.src = url;
    holder.replaceChildren(frame);
  };

  const show = (html, focus) => {
    panel.innerHTML = html;
    panel.hidden = false;
    document.body.classList.add("has-artifact");
    const view = panel.querySelector("[data-artifact-view]");
    if (!view) return;
    try {
      sessionStorage.setItem(remembered, `${view.dataset.artifactView}:${view.dataset.version}`);
    } catch (err) {
      /* storage off: the panel is not reopened after a reload */
    }
    if (focus) {
      const title = view.querySelector("h2");
      title.setAttribute("tabindex", "-1");
      title.focus();
    }
    mount(view);
  };

  const open = async (id, version, focus) => {
    const query = version ? `?v=${encodeURIComponent(version)}` : "";
    const response = await fetch(`${base}${encodeURIComponent(id)}/${query}`, { credentials: "same-origin" });
    if (!response.ok) return;
    show(await response.text(), focus);
  };

  const close = () => {
    panel.hidden = true;
    panel.replaceChildren();
    document.body.classList.remove("has-artifact");
    if (listening) window.removeEventListener("message", listening);
    listening = null;
    loadId++;
    try {
      sessionStorage.removeItem(remembered);
    } catch (err) {
      /* nothing kept */
    }
  };

  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-artifact-open]");
    if (button) {
      event.preventDefault();
      opener = button;
      open(button.dataset.artifactOpen, button.dataset.artifactVersion, true);
      return;
    }
    if (!panel.contains(event.target)) return;
    if (event.target.closest("[data-artifact-close]")) {
      close();
      if (opener && opener.isConnected) opener.focus();
    } else if (event.target.closest("[data-artifact-edit]")) {
      const editor = panel.querySelector("[data-artifact-editor]");
      if (!editor) return;
      editor.hidden = !editor.hidden;
      panel.querySelectorAll(".ap-bar [data-artifact-edit]").forEach((b) => b.setAttribute("aria-expanded", String(!editor.hidden)));
      if (!editor.hidden) editor.querySelector("textarea").focus();
    }
  });

  // Escape closes the panel (not the editor's text: there it leaves the field first).
  panel.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.target.closest("textarea")) return;
    event.stopPropagation();
    close();
    if (opener && opener.isConnected) opener.focus();
  });

  panel.addEventListener("change", (event) => {
    const select = event.target.closest("[data-artifact-versions]");
    const view = panel.querySelector("[data-artifact-view]");
    if (select && view) open(view.dataset.artifactView, select.value, false);
  });

  panel.addEventListener("submit", async (event) => {
    const form = event.target.closest("[data-artifact-editor]");
    if (!form) return;
    event.preventDefault();
    const button = form.querySelector("[type=submit]");
    button.disabled = true;
    try {
      const response = await fetch(form.action, { method: "POST", body: new FormData(form), credentials: "same-origin" });
      // A refused edit (400) comes back as the panel with the draft and the reason.
      if (response.ok || response.status === 400) show(await response.text(), response.ok);
      else button.disabled = false;
    } catch (err) {
      button.disabled = false;
    }
  });

  // A card that arrives live (a new artifact, or a new version by the assistant) opens in the
  // panel; cards already on the page when it loads do not.
  const key = (card) => `${card.dataset.artifact}:${card.dataset.artifactVersion}`;
  const cards = (root) => (root.querySelectorAll ? root.querySelectorAll("[data-artifact][data-artifact-version]") : []);
  cards(document).forEach((card) => seen.add(key(card)));
  let pending = null;
  document.body.addEventListener("htmx:load", (event) => {
    const fresh = Array.from(cards(event.target)).filter((card) => !seen.has(key(card)));
    if (event.target.matches && event.target.matches("[data-artifact][data-artifact-version]") && !seen.has(key(event.target)))
      fresh.push(event.target);
    fresh.forEach((card) => seen.add(key(card)));
    if (!fresh.length) return;
    pending = fresh[fresh.length - 1];
    // Several pushes of one turn come in a burst: open the last one once.
    setTimeout(() => {
      if (!pending) return;
      const card = pending;
      pending = null;
      open(card.dataset.artifact, card.dataset.artifactVersion, false);
    }, 50);
  });

  // A document drawn for one theme is drawn again for the other (Markdown, code, tables, diagrams).
  new MutationObserver(() => {
    const view = panel.querySelector("[data-artifact-view]");
    if (view && !panel.hidden) mount(view);
  }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });

  // After a reload, the artifact that was open is opened again.
  try {
    const kept = sessionStorage.getItem(remembered);
    if (kept) {
      const [id, version] = kept.split(":");
      open(id, version, false);
    }
  } catch (err) {
    /* storage off */
  }
})();
