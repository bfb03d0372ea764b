// Live fan-out as subscribers see it, measured from outside: a stock client (ws, with
// nostr-tools for signing) in its own process holds many connections, each subscribed to
// what is published, and times every delivery from the publisher's send.
//
//   node fanout-latency.mjs --relay-bin ../../target/release/buzz-relay \
//       [--peer-bin ~/.cargo/bin/nostr-rs-relay] [--connections 1000] [--events 200] \
//       [--interval-ms 50] [--database-url postgres://postgres@127.0.0.1:5432/<scratch>]
//
// Per relay: opens --connections connections, each with one REQ `{"kinds":[1],"limit":0}`
// (waits for every EOSE), then one more connection publishes --events kind-1 notes, one
// every --interval-ms (so a delivery measures fan-out, not a queue of earlier events), and
// prints publish → delivery p50/p99/max over all deliveries, the p50/p99 of the time until
// the last subscriber has an event, how many deliveries were missing, and the relay's CPU
// per published event. Node handles every connection on one thread, so a figure includes
// the client's own time to read 1,000 frames: the same for both relays of a run.
import { finalizeEvent, generateSecretKey } from "nostr-tools/pure";
import { commandLine } from "./args.mjs";
import { cpuSeconds, open, percentile, sleep, startBuzz, startPeer, stopAll } from "./relays.mjs";

const args = commandLine();
const connections = Number(args.connections ?? 1000);
const events = Number(args.events ?? 200);
const intervalMs = Number(args["interval-ms"] ?? 50);
if (!args["relay-bin"]) throw new Error("--relay-bin <buzz-relay> is required");

// `connections` subscribers, opened 50 at a time; `onEvent` is told of each delivery (the
// event's id, the time it arrived).
async function subscribers(url, onEvent) {
  const sockets = [];
  for (let i = 0; i < connections; i += 50) {
    const batch = Math.min(50, connections - i);
    sockets.push(...(await Promise.all(Array.from({ length: batch }, () => subscribe(url, onEvent)))));
  }
  return sockets;
}

async function subscribe(url, onEvent) {
  const ws = await open(url);
  await new Promise((resolve, reject) => {
    ws.on("message", (data) => {
      const at = performance.now();
      const text = data.toString();
      if (text.startsWith('["EVENT"')) {
        onEvent(JSON.parse(text)[2].id, at);
        return;
      }
      const msg = JSON.parse(text);
      if (msg[0] === "EOSE") resolve();
      if (msg[0] === "CLOSED") reject(new Error(`${url}: subscription closed: ${msg[2]}`));
    });
    ws.send(JSON.stringify(["REQ", "live", { kinds: [1], limit: 0 }]));
  });
  return ws;
}

async function measure(relay) {
  const sent = new Map();
  const arrivals = new Map(); // id -> delivery times
  const sockets = await subscribers(relay.url, (id, at) => {
    const list = arrivals.get(id);
    if (list) list.push(at);
  });
  const publisher = await open(relay.url);
  const oks = new Map();
  publisher.on("message", (data) => {
    const msg = JSON.parse(data.toString());
    if (msg[0] === "OK") oks.get(msg[1])?.(msg);
  });
  const key = generateSecretKey();
  const notes = Array.from({ length: events }, (_, i) =>
    finalizeEvent({ kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: `fan-out ${i}` }, key),
  );
  await sleep(500);
  const cpuBefore = cpuSeconds(relay.child.pid);
  for (const note of notes) {
    arrivals.set(note.id, []);
    const ok = new Promise((resolve) => oks.set(note.id, resolve));
    sent.set(note.id, performance.now());
    publisher.send(JSON.stringify(["EVENT", note]));
    const answer = await ok;
    if (!answer[2]) throw new Error(`${relay.url}: note refused: ${answer[3]}`);
    await sleep(intervalMs);
  }
  // Let the last deliveries arrive.
  await sleep(2000);
  const cpu = cpuSeconds(relay.child.pid) - cpuBefore;
  const deliveries = [];
  const lastOfEach = [];
  let missing = 0;
  for (const note of notes) {
    const start = sent.get(note.id);
    const times = arrivals.get(note.id);
    missing += connections - times.length;
    for (const t of times) deliveries.push(t - start);
    if (times.length) lastOfEach.push(Math.max(...times) - start);
  }
  publisher.close();
  sockets.forEach((ws) => ws.close());
  deliveries.sort((a, b) => a - b);
  lastOfEach.sort((a, b) => a - b);
  return {
    p50: percentile(deliveries, 50),
    p99: percentile(deliveries, 99),
    max: deliveries[deliveries.length - 1],
    lastP50: percentile(lastOfEach, 50),
    lastP99: percentile(lastOfEach, 99),
    missing,
    cpuMs: (cpu * 1000) / events,
  };
}

const row = (name, r) =>
  `${name.padEnd(16)} delivery p50 ${r.p50.toFixed(2)} ms  p99 ${r.p99.toFixed(2)} ms  max ${r.max.toFixed(1)} ms` +
  `  | last subscriber p50 ${r.lastP50.toFixed(2)} ms  p99 ${r.lastP99.toFixed(2)} ms` +
  `  | missing ${r.missing}  | relay CPU ${r.cpuMs.toFixed(2)} ms/event`;

async function main() {
  const relays = [await startBuzz(args["relay-bin"], args["database-url"])];
  if (args["peer-bin"]) relays.push(await startPeer(args["peer-bin"]));
  console.log(`${connections} subscribed connections, ${events} events one every ${intervalMs} ms`);
  const results = {};
  try {
    for (const relay of relays) {
      results[relay.name] = await measure(relay);
      console.log(row(relay.name, results[relay.name]));
    }
    const [b, p] = [results.buzz, results["nostr-rs-relay"]];
    if (p) {
      console.log(
        `buzz / nostr-rs-relay: delivery p50 ${(b.p50 / p.p50).toFixed(2)}x, p99 ${(b.p99 / p.p99).toFixed(2)}x,` +
          ` CPU per event ${(b.cpuMs / p.cpuMs).toFixed(2)}x`,
      );
    }
  } finally {
    stopAll(relays);
  }
}

main().catch((e) => {
  console.error(`error: ${e.message}`);
  process.exit(1);
});
