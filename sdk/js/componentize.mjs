// Build driver `skyrl plugin build` stages next to the plugin (not part of the
// SDK a plugin imports). Usage:
//
//   node componentize.mjs PKG_DIR STAGING ENTRY WORLD OUTPUT
//
// PKG_DIR is the installed @bytecodealliance/componentize-js package, STAGING
// the folder holding `wit/`, `skyrl-sdk/skyrl_sdk.js`, the plugin folder's
// copy under `plugin/` and ENTRY (the generated entry module, relative to
// STAGING). Rewrites every `"skyrl-sdk"` import in the plugin's copy to a
// relative path (StarlingMonkey resolves module paths only), then
// componentizes ENTRY for WORLD into OUTPUT.

import { createRequire } from "node:module";
import { readFile, readdir, writeFile } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import { pathToFileURL } from "node:url";

const SDK_SPECIFIER = "skyrl-sdk";

async function main() {
  const [pkgDir, staging, entry, world, output] = process.argv.slice(2);
  if (!output) throw new Error("usage: node componentize.mjs PKG_DIR STAGING ENTRY WORLD OUTPUT");

  const pkg = JSON.parse(await readFile(join(pkgDir, "package.json"), "utf8"));
  const exported =
    typeof pkg.exports === "string"
      ? pkg.exports
      : (pkg.exports?.import ?? pkg.exports?.["."]?.import ?? "src/componentize.js");
  const { componentize } = await import(pathToFileURL(join(pkgDir, exported)).href);
  // es-module-lexer is a dependency of componentize-js.
  const lexer = createRequire(join(pkgDir, "package.json"))("es-module-lexer");
  await lexer.init;

  const sdk = join(staging, "skyrl-sdk", "skyrl_sdk.js");
  for (const file of await sources(join(staging, "plugin"))) {
    await rewriteImports(lexer, file, sdk);
  }

  // With the staging folder as the working directory componentize-js maps
  // all of it into the build sandbox, so relative imports between the entry,
  // the plugin's files and the SDK resolve.
  process.chdir(staging);
  const { component } = await componentize({
    sourcePath: join(staging, entry),
    witPath: join(staging, "wit"),
    worldName: world,
    // The host provides WASI p2 without sockets: no fetch(), no HTTP handler.
    disableFeatures: ["http", "fetch-event"],
  });
  await writeFile(output, component);
}

/** Every .js/.mjs file under `dir`. */
async function sources(dir) {
  const out = [];
  for (const item of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, item.name);
    if (item.isDirectory()) out.push(...(await sources(path)));
    else if (item.isFile() && /\.m?js$/.test(item.name)) out.push(path);
  }
  return out;
}

async function rewriteImports(lexer, file, sdk) {
  const text = await readFile(file, "utf8");
  if (!text.includes(SDK_SPECIFIER)) return;
  let imports;
  try {
    [imports] = lexer.parse(text, file);
  } catch {
    return; // not a module we can read; componentize reports it if it is imported
  }
  let target = relative(dirname(file), sdk).split(sep).join("/");
  if (!target.startsWith(".")) target = `./${target}`;
  let result = "";
  let at = 0;
  for (const { n, s, e } of imports) {
    if (n !== SDK_SPECIFIER) continue;
    // Static imports span the bare specifier, dynamic ones the quoted literal.
    const quoted = /^["'`]/.test(text.slice(s, e));
    result += text.slice(at, s) + (quoted ? JSON.stringify(target) : target);
    at = e;
  }
  if (at > 0) await writeFile(file, result + text.slice(at));
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
});
