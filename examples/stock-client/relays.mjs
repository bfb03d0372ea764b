// What the stock-client measurements share: starting a relay of ours or nostr-rs-relay on a
// fresh database and a free port, opening connections, and reading a process's CPU time.
import WebSocket from "ws";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const TICKS = 100; // USER_HZ: the unit of /proc/<pid>/stat times
export const cpuSeconds = (pid) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS;
};
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const percentile = (sorted, p) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] : NaN;

export const freePort = () =>
  new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });

export const open = (url) =>
  new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { maxPayload: 64 * 1024 * 1024 });
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });

export async function waitForRelay(url, child) {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`${url}: the relay exited (${child.exitCode})`);
    try {
      (await open(url)).close();
      return;
    } catch {
      await sleep(100);
    }
  }
  throw new Error(`${url}: the relay did not start`);
}

// `bin args` as a child process, confined to the CPUs `cpus` names (taskset's list syntax,
// e.g. "0" or "0-1") when given: on a small box, a relay kept off the client's CPU is
// measured without the client's own threads (V8's GC and compiler workers) taking the CPU
// a relay thread was woken on. taskset execs the relay, so the child's pid is the relay's.
// A path with a directory in it is taken from this script's working directory, as a
// shell would (the relay itself runs in its own data directory); a bare name is looked up
// on PATH.
function spawnOn(cpus, bin, argv, options) {
  const program = bin.includes("/") ? resolve(bin) : bin;
  return cpus
    ? spawn("taskset", ["-c", cpus, program, ...argv], options)
    : spawn(program, argv, options);
}

// A relay process of ours, on a fresh data directory and a free port.
export async function startBuzz(bin, databaseUrl, extraEnv = {}, cpus = undefined) {
  const dir = mkdtempSync(join(tmpdir(), "buzz-read-load-"));
  const port = await freePort();
  const env = {
    ...process.env,
    BUZZ__SERVER__BIND: `127.0.0.1:${port}`,
    BUZZ__RELAY__DATA_DIR: dir,
    BUZZ__STORAGE__DATABASE_URL: databaseUrl ?? `sqlite://${dir}/buzz.db`,
    BUZZ__METRICS__ENABLED: "false",
    RUST_LOG: "warn",
    ...extraEnv,
  };
  const child = spawnOn(cpus, bin, [], { cwd: dir, env, stdio: ["ignore", "ignore", "inherit"] });
  const url = `ws://127.0.0.1:${port}/`;
  await waitForRelay(url, child);
  return { name: "buzz", url, child, dir };
}

// `extraConfig`: more TOML appended to its config file (e.g. an `[authorization]` section).
export async function startPeer(bin, cpus = undefined, extraConfig = "") {
  const dir = mkdtempSync(join(tmpdir(), "peer-read-load-"));
  const port = await freePort();
  writeFileSync(
    join(dir, "config.toml"),
    `[info]\nrelay_url = "ws://127.0.0.1:${port}/"\nname = "peer"\n` +
      `[database]\ndata_directory = "${dir}"\n` +
      `[network]\naddress = "127.0.0.1"\nport = ${port}\n` +
      `[limits]\nmax_event_bytes = 524288\n` +
      extraConfig,
  );
  const child = spawnOn(cpus, bin, ["--config", join(dir, "config.toml"), "--db", dir], {
    cwd: dir,
    env: { ...process.env, RUST_LOG: "warn" },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const url = `ws://127.0.0.1:${port}/`;
  await waitForRelay(url, child);
  return { name: "nostr-rs-relay", url, child, dir };
}

// Stop every relay started here and remove its data directory.
export function stopAll(relays) {
  for (const relay of relays) {
    relay.child.kill("SIGTERM");
    rmSync(relay.dir, { recursive: true, force: true });
  }
}
