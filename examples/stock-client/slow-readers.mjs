// Relay memory under clients that never read (issue 10, item 1), measured from outside:
// a stock client (nostr-tools) in its own process against a running `buzz-relay`.
//
//   node slow-readers.mjs --relay ws://127.0.0.1:7777 --pid <relay pid>
//
// 1. publishes --events anonymous kind-1 events of --size bytes of content;
// 2. opens --connections sockets that each send --reqs REQs for all of them, then stop
//    reading (the socket is paused, so the kernel buffers fill and the relay sees a
//    client that never drains);
// 3. samples the relay's RSS (from /proc/<pid>/status) every second for --seconds;
// 4. before reading anything, looks up the relay's side of each socket in the kernel
//    (/proc/net/tcp): the relay must have let go of it (reset or closed and empty) — a
//    close frame it merely queued would never reach a client that does not read;
// 5. resumes reading and reports how each socket ended.
import { finalizeEvent, generateSecretKey } from "nostr-tools/pure";
import WebSocket from "ws";
import { commandLine } from "./args.mjs";
import { readFileSync } from "node:fs";

const args = commandLine();
const relay = args.relay ?? "ws://127.0.0.1:7777";
const pid = Number(args.pid);
const events = Number(args.events ?? 300);
const size = Number(args.size ?? 250_000);
const connections = Number(args.connections ?? 6);
const reqs = Number(args.reqs ?? 3);
const seconds = Number(args.seconds ?? 40);
if (!pid) throw new Error("--pid <relay pid> is required (its RSS is what we measure)");

const rssMb = () => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
  return kb / 1024;
};

const open = (url) =>
  new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { maxPayload: 64 * 1024 * 1024 });
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });

// The relay's end of the connection from local `port` to the relay: "gone", or the
// kernel's state and send-queue bytes while it still holds the socket.
const relayPort = Number(new URL(relay).port || 80);
const hex = (n, w) => n.toString(16).toUpperCase().padStart(w, "0");
function relaySide(port) {
  const table = readFileSync("/proc/net/tcp", "utf8").split("\n").slice(1);
  for (const line of table) {
    const f = line.trim().split(/\s+/);
    if (f.length < 5) continue;
    if (f[1].endsWith(`:${hex(relayPort, 4)}`) && f[2].endsWith(`:${hex(port, 4)}`)) {
      const state = parseInt(f[3], 16);
      const txQueue = parseInt(f[4].split(":")[0], 16);
      // TIME_WAIT (6) and CLOSE (7) with nothing queued hold nothing.
      if ((state === 6 || state === 7) && txQueue === 0) return "gone";
      return `state ${hex(state, 2)}, ${txQueue} B queued`;
    }
  }
  return "gone";
}

async function publish() {
  const ws = await open(relay);
  const sk = generateSecretKey();
  const pending = new Map();
  ws.on("message", (data) => {
    const msg = JSON.parse(data.toString());
    if (msg[0] === "OK" && pending.has(msg[1])) {
      pending.get(msg[1])(msg);
      pending.delete(msg[1]);
    }
  });
  const body = "x".repeat(size);
  const base = Math.floor(Date.now() / 1000);
  for (let i = 0; i < events; i++) {
    const event = finalizeEvent(
      { kind: 1, created_at: base - i, tags: [], content: `${i} ${body}`.slice(0, size) },
      sk,
    );
    const ok = await new Promise((resolve) => {
      pending.set(event.id, resolve);
      ws.send(JSON.stringify(["EVENT", event]));
    });
    if (!ok[2]) throw new Error(`event ${i} refused: ${ok[3]}`);
  }
  ws.close();
}

async function main() {
  const before = rssMb();
  await publish();
  const seeded = rssMb();
  console.log(`published ${events} x ${size} B; relay RSS ${before.toFixed(0)} -> ${seeded.toFixed(0)} MB`);

  const sockets = [];
  for (let c = 0; c < connections; c++) {
    const ws = await open(relay);
    const state = { ws, closed: null };
    ws.on("close", (code, reason) => (state.closed = `${code} ${reason}`));
    ws.on("error", () => {}); // a reset connection ends with "close" 1006 after this
    for (let r = 0; r < reqs; r++) ws.send(JSON.stringify(["REQ", `s${r}`, { kinds: [1], limit: events }]));
    ws._socket.pause(); // never read again
    sockets.push(state);
  }
  let peak = rssMb();
  for (let s = 1; s <= seconds; s++) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = rssMb();
    peak = Math.max(peak, now);
    if (s % 5 === 0) console.log(`t=${s}s relay RSS ${now.toFixed(0)} MB (peak ${peak.toFixed(0)})`);
  }
  const end = rssMb();
  const held = sockets
    .map((s) => relaySide(s.ws._socket.localPort))
    .filter((side) => side !== "gone");
  console.log(
    `relay-side sockets still held after ${seconds}s (clients read nothing): ` +
      `${held.length}/${connections}` + (held.length ? ` (${held.slice(0, 3).join("; ")})` : ""),
  );
  for (const s of sockets) s.ws._socket.resume();
  await new Promise((r) => setTimeout(r, 3000));
  const closed = sockets.filter((s) => s.closed !== null);
  console.log(
    `readers ${connections} x ${reqs} REQs: relay RSS peak ${peak.toFixed(0)} MB, ` +
      `after ${seconds}s ${end.toFixed(0)} MB (seeded ${seeded.toFixed(0)} MB); ` +
      `closed by the relay: ${closed.length}/${connections}` +
      (closed.length ? ` (${[...new Set(closed.map((s) => s.closed))].join("; ")})` : ""),
  );
  for (const s of sockets) s.ws.terminate();
}

main().catch((e) => {
  console.error(`error: ${e.message}`);
  process.exit(1);
});
