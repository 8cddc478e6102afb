#!/usr/bin/env node
// `npx memory-rs-openclaw <args>` (and `memory-rs-openclaw` after `npm install -g`): runs the `memory` binary
// this package found for the platform (packed in bin/<platform>-<arch>/, else the optional dependency
// memory-rs-openclaw-<platform>-<arch>) with the same arguments, stdio and exit status. It never falls back to
// PATH: a `memory` there could be this very script, installed globally.

import { spawn } from "node:child_process";
import { resolveCommand, startFailure } from "./lib/engine.js";

const { command, from } = resolveCommand(undefined);
if (from === "path") {
  const err = Object.assign(new Error("not found"), { code: "ENOENT" });
  console.error(`memory-rs-openclaw: ${startFailure("memory", err).replace(", and `memory` is not on PATH", "")}`);
  process.exit(127);
}
const child = spawn(command, process.argv.slice(2), { stdio: "inherit" });
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, () => child.kill(sig));
child.on("error", (err) => {
  console.error(`memory-rs-openclaw: ${startFailure(command, err)}`);
  process.exit(127);
});
child.on("exit", (code, signal) => {
  if (signal) process.kill(process.pid, signal);
  else process.exit(code ?? 1);
});
