// MCP Apps host, part of static/js/mcp_apps.js: a View's `ui/message`, added to the chat only as
// the user would add it: the composer sends it, and it shows as theirs. Where the server's admin
// asks for it (MCPServer.apps_confirm_messages), the user first sees it on the View's card, under
// the View, and sends or discards it there; the View is told which.
(() => {
  "use strict";
  const apps = (window.TesseraMcpApps = window.TesseraMcpApps || {});
  const MAX_CHARS = 20000;
  let asked = 0;

  const send = (text) => {
    const form = document.getElementById("composer");
    const input = document.getElementById("composer-input");
    if (!form || !input) return false;
    input.value = text;
    form.requestSubmit();
    return true;
  };

  const button = (label, kind, testid) => {
    const found = document.createElement("button");
    found.type = "button";
    found.className = `btn btn-small ${kind}`;
    found.textContent = label;
    found.dataset.testid = testid;
    return found;
  };

  // The card under the View: the message as it would be sent, Send or Discard. Resolves true on Send.
  const confirmOnCard = (asks, server, text) =>
    new Promise((resolve) => {
      const id = `mcp-app-message-${++asked}`;
      const holder = document.createElement("div");
      holder.className = "tc-app-ask";
      holder.dataset.testid = "mcp-app-message";
      const card = document.createElement("div");
      card.className = "tc-approval";
      card.setAttribute("role", "group");
      card.setAttribute("aria-labelledby", id);
      const title = document.createElement("p");
      title.className = "tc-approval-title";
      title.id = id;
      title.append("The app from ");
      const name = document.createElement("strong");
      name.textContent = server;
      title.append(name, " wants to send this message as you:");
      const shown = document.createElement("blockquote");
      shown.className = "tc-app-message-text";
      shown.textContent = text;
      const actions = document.createElement("div");
      actions.className = "tc-approval-actions";
      const yes = button("Send", "btn-primary", "mcp-app-message-send");
      const no = button("Discard", "", "mcp-app-message-discard");
      actions.append(yes, no);
      card.append(title, shown, actions);
      holder.append(card);
      asks.append(holder);
      holder.scrollIntoView({ block: "nearest" });
      const settle = (sent) => {
        const note = document.createElement("p");
        note.className = "tc-note";
        note.setAttribute("role", "status");
        note.textContent = sent ? "Sent as your message." : "Discarded: the app was told it was not sent.";
        holder.classList.add("is-done");
        holder.replaceChildren(note);
        resolve(sent);
      };
      yes.onclick = () => settle(true);
      no.onclick = () => settle(false);
    });

  // True once the message went to the composer; false when there is nothing to send, nowhere
  // to send it, or the user discarded it.
  apps.sendMessage = async ({ text, confirm, server, asks, beforeSend }) => {
    const message = (text || "").slice(0, MAX_CHARS);
    if (!message || !document.getElementById("composer")) return false;
    if (confirm) {
      const sent = asks
        ? await confirmOnCard(asks, server, message)
        : await apps.confirmInPage(`Send a message from ${server}'s app?`, message, "Send");
      if (!sent) return false;
    }
    if (beforeSend) beforeSend();
    return send(message);
  };
})();
