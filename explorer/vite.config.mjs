// The context explorer's front end: `npm run build` bundles explorer/ into dist/explorer, which
// contextd serves at /explorer/ (src/server/explorer/). Everything is bundled: the page fetches
// nothing from another host, and no script is inline (the server's CSP allows only 'self').
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/explorer/",
  logLevel: "warn",
  build: {
    outDir: fileURLToPath(new URL("../dist/explorer", import.meta.url)),
    emptyOutDir: true,
    // No inline module-preload polyfill, no inlined assets: every script and style is a file.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
  },
});
