// What an idle connection costs a relay, and how fast a message still reaches all of them:
// team chat keeps every member's socket open all day.
//
//   node idle-connections.mjs --relay-bin ../../target/release/buzz-relay \
//       [--peer-bin ~/.cargo/bin/nostr-rs-relay] [--connections 10000] [--workers 2] \
//       [--batch 100] [--events 20] [--interval-ms 500] [--database-url <url>]
//
// Per relay, started alone on a fresh database: reads its VmRSS (/proc/<pid>/status), opens
// --connections connections from --workers worker threads (idle-worker.mjs), --batch at a
// time per worker, each authenticated with NIP-42 under a key of its own and holding one
// REQ `{"kinds":[1],"limit":1}` (its EOSE awaited; the database is empty, so it answers
// nothing; nostr-rs-relay 0.8.12 sends no EOSE for `limit: 0`), waits for the relay to
// settle, reads VmRSS again and prints the difference per connection. Then one more
// connection publishes --events kind-1 notes, one every --interval-ms, and the script
// prints publish → delivery p50/p99 over all deliveries, p50/p99 of the time until the
// last connection had each event, deliveries missing and connections the relay closed.
// nostr-rs-relay (--peer-bin) runs with `nip42_auth = true`, so its connections
// authenticate the same way.
//
// The client needs a descriptor per connection: raise its limit first (`ulimit -n`, up to
// `ulimit -Hn`). The relay raises its own (buzz at start; the figure printed is read from
// /proc/<pid>/limits).
import { readFileSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { finalizeEvent, generateSecretKey } from "nostr-tools/pure";
import { commandLine } from "./args.mjs";
import { open, percentile, sleep, startBuzz, startPeer, stopAll } from "./relays.mjs";

const args = commandLine();
const connections = Number(args.connections ?? 10000);
const workers = Number(args.workers ?? 2);
const batch = Number(args.batch ?? 100);
const events = Number(args.events ?? 20);
const intervalMs = Number(args["interval-ms"] ?? 500);
if (!args["relay-bin"]) throw new Error("--relay-bin <buzz-relay> is required");

const now = () => performance.timeOrigin + performance.now();
const status = (pid, field) => {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${field}:`));
  return Number(line?.split(/\s+/)[1] ?? NaN); // kB
};
const openFiles = (pid) =>
  readFileSync(`/proc/${pid}/limits`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("Max open files"))
    ?.split(/\s{2,}/)
    .slice(1, 3)
    .join(" / ");

// Every worker's answer to `command`, once each has sent one that `done` accepts.
function ask(threads, command, done, onOther = () => {}) {
  return Promise.all(
    threads.map(
      (t, i) =>
        new Promise((resolve, reject) => {
          const listen = (msg) => {
            if (msg.error) {
              t.off("message", listen);
              reject(new Error(msg.error));
            } else if (done(msg)) {
              t.off("message", listen);
              resolve(msg);
            } else onOther(msg, i);
          };
          t.on("message", listen);
          if (command) t.postMessage(command);
        }),
    ),
  );
}

async function measure(relay) {
  const pid = relay.child.pid;
  await sleep(1000);
  const before = status(pid, "VmRSS");
  const share = (i) => Math.floor(connections / workers) + (i < connections % workers ? 1 : 0);
  const threads = Array.from(
    { length: workers },
    (_, i) =>
      new Worker(new URL("./idle-worker.mjs", import.meta.url), {
        workerData: { url: relay.url, count: share(i), batch },
      }),
  );
  const opened = new Array(workers).fill(0);
  const started = now();
  let shown = 0;
  await ask(threads, "open", (m) => m.ready, (m, i) => {
    if (m.opened === undefined) return;
    opened[i] = m.opened;
    const total = opened.reduce((a, b) => a + b, 0);
    if (total - shown >= 1000) {
      shown = total;
      process.stdout.write(`  ${relay.name}: ${total} connections\r`);
    }
  }).catch(async (e) => {
    await Promise.all(threads.map((t) => t.terminate()));
    throw e;
  });
  const openSecs = (now() - started) / 1000;
  // Let the relay finish what connecting left behind (freed buffers, idle tasks).
  await sleep(3000);
  const after = status(pid, "VmRSS");

  const publisher = await open(relay.url);
  const oks = new Map();
  publisher.on("message", (data) => {
    const msg = JSON.parse(data.toString());
    if (msg[0] === "OK") oks.get(msg[1])?.(msg);
  });
  const key = generateSecretKey();
  const sent = new Map();
  for (let i = 0; i < events; i++) {
    const note = finalizeEvent(
      { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: `to everyone ${i}` },
      key,
    );
    const ok = new Promise((resolve) => oks.set(note.id, resolve));
    sent.set(note.id, now());
    publisher.send(JSON.stringify(["EVENT", note]));
    const answer = await ok;
    if (!answer[2]) throw new Error(`${relay.url}: note refused: ${answer[3]}`);
    await sleep(intervalMs);
  }
  await sleep(3000); // the last deliveries
  const peak = status(pid, "VmHWM");
  const reports = await ask(threads, "report", (m) => m.arrivals !== undefined);
  await ask(threads, "close", (m) => m.done);
  await Promise.all(threads.map((t) => t.terminate()));
  publisher.close();

  const times = new Map([...sent.keys()].map((id) => [id, []]));
  for (const r of reports) for (const [id, list] of r.arrivals) times.get(id)?.push(...list);
  const deliveries = [];
  const lastOfEach = [];
  let missing = 0;
  for (const [id, start] of sent) {
    const list = times.get(id);
    missing += connections - list.length;
    for (const t of list) deliveries.push(t - start);
    if (list.length) lastOfEach.push(Math.max(...list) - start);
  }
  deliveries.sort((a, b) => a - b);
  lastOfEach.sort((a, b) => a - b);
  return {
    files: openFiles(pid),
    openSecs,
    before,
    after,
    peak,
    perConnKb: (after - before) / connections,
    p50: percentile(deliveries, 50),
    p99: percentile(deliveries, 99),
    lastP50: percentile(lastOfEach, 50),
    lastP99: percentile(lastOfEach, 99),
    missing,
    closed: reports.reduce((a, r) => a + r.closed, 0),
  };
}

const row = (name, r) =>
  `${name.padEnd(15)} RSS ${(r.before / 1024).toFixed(1)} → ${(r.after / 1024).toFixed(1)} MB` +
  ` (peak ${(r.peak / 1024).toFixed(1)} MB): ${r.perConnKb.toFixed(1)} KB per connection` +
  `  | opened in ${r.openSecs.toFixed(1)} s  | open-file limit ${r.files}\n` +
  `${"".padEnd(15)} delivery p50 ${r.p50.toFixed(1)} ms  p99 ${r.p99.toFixed(1)} ms` +
  `  | last connection p50 ${r.lastP50.toFixed(1)} ms  p99 ${r.lastP99.toFixed(1)} ms` +
  `  | missing ${r.missing}  | closed by the relay ${r.closed}`;

async function main() {
  console.log(
    `${connections} idle connections (NIP-42 authenticated, one REQ each; ${workers} client threads),` +
      ` then ${events} events one every ${intervalMs} ms`,
  );
  const starts = [() => startBuzz(args["relay-bin"], args["database-url"])];
  if (args["peer-bin"]) {
    starts.push(() => startPeer(args["peer-bin"], undefined, "[authorization]\nnip42_auth = true\n"));
  }
  const results = {};
  for (const start of starts) {
    const relay = await start();
    try {
      results[relay.name] = await measure(relay);
      console.log(row(relay.name, results[relay.name]));
    } finally {
      stopAll([relay]);
    }
  }
  const [b, p] = [results.buzz, results["nostr-rs-relay"]];
  if (p) {
    console.log(
      `buzz / nostr-rs-relay: RSS per connection ${(b.perConnKb / p.perConnKb).toFixed(2)}x,` +
        ` delivery p99 ${(b.p99 / p.p99).toFixed(2)}x, last connection p99 ${(b.lastP99 / p.lastP99).toFixed(2)}x`,
    );
  }
}

main().catch((e) => {
  console.error(`error: ${e.message}`);
  process.exit(1);
});
