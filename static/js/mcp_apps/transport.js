// MCP Apps host, part of static/js/mcp_apps.js: the app-bridge's transport to one View. Its
// messages come from its proxy frame on the sandbox origin only, and go to it only; a View that
// floods is throttled, then stopped (the page must stay responsive whatever it does).
(() => {
  "use strict";
  const apps = (window.TesseraMcpApps = window.TesseraMcpApps || {});
  // A View may send this many messages a second; past it they are dropped, and a View that
  // keeps flooding is stopped.
  const MESSAGES_PER_SECOND = 50;
  const DROPPED_BEFORE_STOP = 500;

  apps.SandboxTransport = class SandboxTransport {
    constructor(frame, origin, onFlood) {
      this.frame = frame;
      this.origin = origin;
      this.onFlood = onFlood;
      this.window = 0;
      this.count = 0;
      this.dropped = 0;
      this.listener = (event) => {
        if (event.source !== this.frame.contentWindow || event.origin !== this.origin) return;
        const data = event.data;
        if (!data || typeof data !== "object" || data.jsonrpc !== "2.0") return;
        const second = Math.floor(performance.now() / 1000);
        if (second !== this.window) {
          this.window = second;
          this.count = 0;
        }
        if (++this.count > MESSAGES_PER_SECOND) {
          if (++this.dropped === DROPPED_BEFORE_STOP) this.onFlood();
          return;
        }
        if (this.onmessage) this.onmessage(data);
      };
    }
    async start() {
      window.addEventListener("message", this.listener);
    }
    async send(message) {
      if (this.frame.contentWindow) this.frame.contentWindow.postMessage(message, this.origin);
    }
    async close() {
      window.removeEventListener("message", this.listener);
      if (this.onclose) this.onclose();
    }
  };
})();
