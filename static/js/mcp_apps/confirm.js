// MCP Apps host, part of static/js/mcp_apps.js: Tessera's own modal question over the page, for
// what a View asks that leaves the page (open a link, save a file). The View cannot reach or
// draw over it. Resolves true only on an explicit "Allow".
(() => {
  "use strict";
  const apps = (window.TesseraMcpApps = window.TesseraMcpApps || {});

  apps.confirmInPage = (title, detail, allowLabel) =>
    new Promise((resolve) => {
      const dialog = document.createElement("dialog");
      dialog.className = "mcp-app-confirm";
      dialog.setAttribute("aria-labelledby", "mcp-app-confirm-title");
      dialog.dataset.testid = "mcp-app-confirm";
      const heading = document.createElement("h2");
      heading.id = "mcp-app-confirm-title";
      heading.textContent = title;
      const body = document.createElement("p");
      body.className = "mcp-app-confirm-detail";
      body.textContent = detail;
      const actions = document.createElement("div");
      actions.className = "mcp-app-confirm-actions";
      const deny = document.createElement("button");
      deny.type = "button";
      deny.className = "btn";
      deny.textContent = "Cancel";
      const allow = document.createElement("button");
      allow.type = "button";
      allow.className = "btn btn-primary";
      allow.textContent = allowLabel;
      allow.dataset.testid = "mcp-app-confirm-allow";
      actions.append(deny, allow);
      dialog.append(heading, body, actions);
      let answer = false;
      deny.onclick = () => dialog.close();
      allow.onclick = () => {
        answer = true;
        dialog.close();
      };
      dialog.addEventListener("close", () => {
        dialog.remove();
        resolve(answer);
      });
      document.body.appendChild(dialog);
      dialog.showModal();
      deny.focus();
    });
})();
