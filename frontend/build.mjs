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
//   smaller), the extension minified like the scripts above.
// - anything else (the logo): copied as it is.
import { build } from "esbuild";
import { cpSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const source = join(root, "static");
const out = join(root, "build", "static");

const VENDOR_MINIFIED = { "vendor/htmx/htmx.min.js": "node_modules/htmx.org/dist/htmx.min.js" };
const VENDOR = { "vendor/htmx-ext-ws/ws.js": "node_modules/htmx-ext-ws/dist/ws.js" };

function files(folder) {
  return readdirSync(folder, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(source, join(entry.parentPath, entry.name)));
}

rmSync(out, { recursive: true, force: true });
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
