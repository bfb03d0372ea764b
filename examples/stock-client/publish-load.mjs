// Relay CPU per accepted event under a publishing load from a stock client (nostr-tools
// over WebSocket, in its own process), as operators and outside benchmarks run it.
//
//   node publish-load.mjs --relay ws://127.0.0.1:7777 --pid <relay pid>
//
// 1. signs --events kind-1 notes with nostr-tools, one key per connection (before the
//    clock starts);
// 2. opens --connections sockets and sends every event, each socket keeping --inflight
//    EVENTs unanswered (the relay's `limits.max_inflight_events` is 64 by default);
// 3. counts OK true / false and reads the relay's CPU time (utime + stime from
//    /proc/<pid>/stat) before and after, and prints events/s, the relay's cores and its
//    CPU per accepted event. Compare the last with the bare-verify CPU that
//    `ingest-bench` prints on the same machine.
import { finalizeEvent, generateSecretKey } from "nostr-tools/pure";
import WebSocket from "ws";
import { commandLine } from "./args.mjs";
import { readFileSync } from "node:fs";

const args = commandLine();
const relay = args.relay ?? "ws://127.0.0.1:7777";
const pid = Number(args.pid);
const total = Number(args.events ?? 40_000);
const connections = Number(args.connections ?? 8);
const inflight = Number(args.inflight ?? 64);
if (!pid) throw new Error("--pid <relay pid> is required (its CPU time is what we measure)");

// Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux).
const TICKS = 100;
const relayCpuSeconds = () => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may contain spaces) start at ") ".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS;
};

const signStarted = performance.now();
const perConnection = Math.ceil(total / connections);
const created = Math.floor(Date.now() / 1000);
const batches = Array.from({ length: connections }, (_, c) => {
  const key = generateSecretKey();
  const count = Math.min(perConnection, total - c * perConnection);
  return Array.from({ length: Math.max(count, 0) }, (_, i) =>
    JSON.stringify([
      "EVENT",
      finalizeEvent(
        { kind: 1, created_at: created, tags: [["t", "load"]], content: `load note ${i} from ${c}` },
        key,
      ),
    ]),
  );
});
const signSeconds = (performance.now() - signStarted) / 1000;

const open = (url) =>
  new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });

// Sends `frames` keeping `inflight` unanswered; resolves with the OK counts.
const publish = (ws, frames) =>
  new Promise((resolve, reject) => {
    let sent = 0;
    let accepted = 0;
    let refused = 0;
    let firstRefusal = null;
    const top = () => {
      while (sent < frames.length && sent - accepted - refused < inflight) {
        ws.send(frames[sent++]);
      }
    };
    ws.on("message", (data) => {
      const message = JSON.parse(data.toString());
      if (message[0] !== "OK") return;
      if (message[2] === true) accepted++;
      else {
        refused++;
        firstRefusal ??= message[3];
      }
      if (accepted + refused === frames.length) resolve({ accepted, refused, firstRefusal });
      else top();
    });
    ws.once("close", () => reject(new Error("the relay closed a publishing socket")));
    top();
  });

const sockets = await Promise.all(batches.map(() => open(relay)));
const cpuBefore = relayCpuSeconds();
const started = performance.now();
const results = await Promise.all(sockets.map((ws, c) => publish(ws, batches[c])));
const seconds = (performance.now() - started) / 1000;
const cpu = relayCpuSeconds() - cpuBefore;
for (const ws of sockets) ws.terminate();

const accepted = results.reduce((n, r) => n + r.accepted, 0);
const refused = results.reduce((n, r) => n + r.refused, 0);
console.log(`stock client (nostr-tools ${connections} connections, ${inflight} in flight each) -> ${relay}`);
console.log(`  signed ${total} events in ${signSeconds.toFixed(1)} s (before the clock starts)`);
console.log(`  accepted ${accepted}, refused ${refused} in ${seconds.toFixed(2)} s: ${Math.round(accepted / seconds)} events/s`);
if (refused > 0) console.log(`  first refusal: ${results.find((r) => r.firstRefusal)?.firstRefusal}`);
console.log(`  relay CPU: ${cpu.toFixed(2)} s = ${(cpu / seconds).toFixed(2)} cores`);
if (accepted > 0) {
  console.log(`  relay CPU per accepted event: ${((cpu / accepted) * 1e6).toFixed(1)} µs`);
}
process.exit(refused > 0 ? 1 : 0);
