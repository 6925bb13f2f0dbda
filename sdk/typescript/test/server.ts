// A real `clearance serve` for the tests: built from the repository (or
// CLEARANCE_BIN), started on a free port with a fresh data directory, and
// stopped by the caller.
import { execFile, spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** The repository root: this file runs from sdk/typescript/dist/test. */
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");

export interface TestServer {
  url: string;
  platformKey: string;
  stop(): Promise<void>;
  /** Everything the server wrote, for failure messages. */
  output(): string;
}

/** CLEARANCE_BIN, or a binary built from the repository into dir. */
async function clearanceBinary(dir: string): Promise<string> {
  const fromEnv = process.env["CLEARANCE_BIN"];
  if (fromEnv) {
    return fromEnv;
  }
  if (!existsSync(join(repoRoot, "go.mod"))) {
    throw new Error(`no go.mod at ${repoRoot}; set CLEARANCE_BIN`);
  }
  const bin = join(dir, "clearance");
  await promisify(execFile)("go", ["build", "-o", bin, "./cmd/clearance"], { cwd: repoRoot });
  return bin;
}

/** Starts `clearance serve` and resolves once its "listening" log line names the URL. */
export async function startServer(extraArgs: string[] = []): Promise<TestServer> {
  const dir = await mkdtemp(join(tmpdir(), "clearance-sdk-ts-"));
  const bin = await clearanceBinary(dir);
  const dataDir = join(dir, "data");
  const child = spawn(bin, ["serve", "--data", dataDir, "--addr", "127.0.0.1:0", ...extraArgs], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  const exited = new Promise<void>((resolveExit) => child.once("exit", () => resolveExit()));

  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`clearance serve did not log "listening" within 60 s:\n${output}`)), 60_000);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`clearance serve exited (${code}) before listening:\n${output}`));
    });
    createInterface({ input: child.stdout }).on("line", (line) => {
      output += line + "\n";
      try {
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg === "listening" && entry.url) {
          clearTimeout(timer);
          resolveUrl(entry.url);
        }
      } catch {
        // not a JSON log line
      }
    });
  }).catch(async (err: unknown) => {
    await stopChild(child, exited);
    await rm(dir, { recursive: true, force: true });
    throw err;
  });
  const platformKey = (await readFile(join(dataDir, "platform.key"), "utf8")).trim();
  return {
    url,
    platformKey,
    output: () => output,
    stop: async () => {
      await stopChild(child, exited);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function stopChild(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill("SIGTERM");
    const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(killer);
  }
}

/** A JSON call with a bearer key, for the setup steps the SDK does not cover. */
export async function call(url: string, key: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const init: RequestInit = { method, headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
  }
  const res = await fetch(url + path, init);
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** Creates an org with the platform key and publishes an ENFORCEMENT policy: ALLOW below 1000, BLOCK from 1000. */
export async function createEnforcingOrg(server: TestServer, name: string): Promise<{ orgId: string; apiKey: string }> {
  const org = await call(server.url, server.platformKey, "POST", "/v1/platform/orgs", { name });
  if (org.status !== 201 && org.status !== 200) {
    throw new Error(`create org: ${org.status} ${JSON.stringify(org.body)}`);
  }
  const { org_id: orgId, api_key: apiKey } = org.body as { org_id: string; api_key: string };
  const bundle = await call(server.url, apiKey, "POST", "/v1/protocol/policies/bundles", {
    bundle_id: "sdk-ts",
    version: "v1",
    mode: "ENFORCEMENT",
    rules: [{ id: "large", match: [{ field: "amount", op: "ge", value: 1000 }], outcome: "BLOCK", reason_codes: ["TOO_LARGE"] }],
    default: { outcome: "ALLOW", reason_codes: ["WITHIN_LIMIT"] },
  });
  if (bundle.status !== 201 && bundle.status !== 200) {
    throw new Error(`publish policy: ${bundle.status} ${JSON.stringify(bundle.body)}`);
  }
  return { orgId, apiKey };
}
