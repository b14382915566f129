// The files the browser loads, minified: `npm run build` (run by `make static`, which `make run`
// and CI use) writes them to build/static/; collectstatic then gives them content-hashed names
// and gzip and Brotli copies (config/settings.py). DEBUG=true serves static/ as written instead.
//
// Why esbuild: one tool, pinned in package-lock.json, minifies both the stylesheets and the
// scripts (lightningcss + terser would be two, terser with a dozen transitive packages); it is a
// single native binary with no plugins, and builds all of this in a fraction of a second.
//
// - static/**/*.css: bundled (`@import`s inlined, so css/tessera.css is the page's one
//   stylesheet) and minified.
// - static/**/*.js: minified one by one, not bundled. Each is a classic script that wraps itself
//   in a function; bundling would wrap it again and change nothing but the bytes.
// - htmx and its websocket extension, from node_modules (package-lock.json), under the names
//   the templates use in development too: htmx's own minified file as it is (esbuild's is no
//   smaller), the extension minified like the scripts above. Mermaid's minified bundle, as it is,
//   for Mermaid artifacts (drawn inside their sandboxed frame, never on Tessera's pages).
// - the official MCP Apps host bridge (frontend/app-bridge.mjs, from package-lock.json), the one
//   bundled script: an ES module with its dependencies, made one classic script. It is also
//   written to build/vendor/mcp-apps/, which DEBUG=true serves (config/settings.py).
// - anything else (the logo): copied as it is.
// - the View of Tessera's cards as MCP Apps (frontend/mcp_app/view.js): bundled with the View side
//   of `@modelcontextprotocol/ext-apps` into one classic script, written to build/mcp_app/ (not
//   static/: no page loads it; hub/mcp_apps.py puts it inline in the `ui://tessera/…` resources).
import { build } from "esbuild";
import { cpSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const source = join(root, "static");
const out = join(root, "build", "static");
const appOut = join(root, "build", "mcp_app");

const VENDOR_MINIFIED = {
  "vendor/htmx/htmx.min.js": "node_modules/htmx.org/dist/htmx.min.js",
  // Mermaid's own minified IIFE, which the artifact panel puts inside a diagram's sandboxed frame
  // (static/js/artifacts.js): never loaded by Tessera's pages themselves.
  "vendor/mermaid/mermaid.min.js": "node_modules/mermaid/dist/mermaid.min.js",
};
const VENDOR = { "vendor/htmx-ext-ws/ws.js": "node_modules/htmx-ext-ws/dist/ws.js" };

function files(folder) {
  return readdirSync(folder, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(source, join(entry.parentPath, entry.name)));
}

rmSync(out, { recursive: true, force: true });
rmSync(appOut, { recursive: true, force: true });
const styles = {};
const scripts = {};
for (const name of files(source)) {
  if (name.endsWith(".css")) styles[name.slice(0, -4)] = join(source, name);
  else if (name.endsWith(".js")) scripts[name.slice(0, -3)] = join(source, name);
  else {
    mkdirSync(dirname(join(out, name)), { recursive: true });
    cpSync(join(source, name), join(out, name));
  }
}
for (const [name, path] of Object.entries(VENDOR)) scripts[name.slice(0, -3)] = join(root, path);
for (const [name, path] of Object.entries(VENDOR_MINIFIED)) {
  mkdirSync(dirname(join(out, name)), { recursive: true });
  cpSync(join(root, path), join(out, name));
}

const common = { outdir: out, minify: true, logLevel: "warning", legalComments: "eof" };
await build({ ...common, entryPoints: styles, bundle: true });
await build({ ...common, entryPoints: scripts, bundle: false });
await build({
  entryPoints: { view: join(root, "frontend", "mcp_app", "view.js") },
  outdir: appOut,
  bundle: true,
  format: "iife",
  platform: "browser",
  minify: true,
  logLevel: "warning",
  legalComments: "eof",
});
const bridge = {
  entryPoints: [join(root, "frontend", "app-bridge.mjs")],
  bundle: true,
  format: "iife",
  minify: true,
  logLevel: "warning",
  legalComments: "eof",
  target: "es2020",
};
await build({ ...bridge, outfile: join(out, "vendor", "mcp-apps", "app-bridge.js") });
await build({ ...bridge, outfile: join(root, "build", "vendor", "mcp-apps", "app-bridge.js") });
