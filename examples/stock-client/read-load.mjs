// The read path as a chat client drives it, measured from outside: a stock client (ws, with
// nostr-tools for signing) in its own process, against `buzz-relay` and — when its binary is
// given — nostr-rs-relay in the same run, each started here on a fresh database.
//
//   node read-load.mjs --relay-bin ../../target/release/buzz-relay \
//       [--peer-bin ~/.cargo/bin/nostr-rs-relay] [--notes 20000] [--requests 4000] \
//       [--connections 4] [--database-url postgres://postgres@127.0.0.1:5432/<scratch>] \
//       [--notes-file /tmp/notes.json] [--shape "kinds"] [--single 500] [--relay-cpus 0] \
//       [--warmup 1000]
//
// (--relay-cpus LIST confines each relay to those CPUs with taskset; run this script
// under `taskset -c OTHER node …` to keep the client off them.)
// 1. signs --notes kind-1 notes (200 authors, 100 `t` topics, created over the last ten
//    minutes) and publishes the same notes to every relay;
// 2. for each filter shape — {"kinds":[1],"limit":50}, {"authors":[a],"limit":20},
//    {"#t":[x],"limit":20}, {"ids":[10 ids]} — runs --single REQs one at a time on one
//    connection (REQ, wait for EOSE, CLOSE);
// 3. runs --warmup REQs of the mixed load below and prints their figures as a warm-up,
//    not counted: the first second of a load at this concurrency is slower at p99 on
//    both sides (the client's compiler and heap; the relay's read threads and pooled
//    connections that the one-connection runs left idle), and the target is the
//    steady state;
// 4. runs --requests REQs of the four shapes in turn over --connections connections, each
//    connection one REQ at a time (closed loop);
// (--shape TEXT keeps only the shapes whose label contains TEXT, for profiling one of them)
// and prints, per relay and run, queries/s, p50/p99 from REQ to EOSE, and the relay's CPU
// per query (utime + stime from /proc/<pid>/stat), then each buzz figure as a ratio of the
// peer's. Each row also says how many REQs took over 3× the p50 and how many of those
// overlapped a garbage collection of this client (node's `gc` performance entries), with
// the p99 of the REQs no collection touched: a tail the client makes is not the relay's.
import { finalizeEvent, generateSecretKey, getPublicKey } from "nostr-tools/pure";
import { commandLine } from "./args.mjs";
import { cpuSeconds, open, percentile, sleep, startBuzz, startPeer, stopAll } from "./relays.mjs";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { PerformanceObserver } from "node:perf_hooks";

// This process's garbage collections, as [start, end] on the performance.now() clock.
const gcPauses = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) gcPauses.push([entry.startTime, entry.startTime + entry.duration]);
}).observe({ entryTypes: ["gc"] });
const touchedByGc = ({ started, ended }) => gcPauses.some(([from, to]) => from < ended && to > started);

const args = commandLine();
const notes = Number(args.notes ?? 20_000);
const requests = Number(args.requests ?? 4_000);
const connections = Number(args.connections ?? 4);
const single = Number(args.single ?? 500);
const warmup = Number(args.warmup ?? 1_000);
if (!args["relay-bin"]) throw new Error("--relay-bin <buzz-relay> is required");

// The notes every relay gets: the same signed events.
function makeNotes() {
  const authors = Array.from({ length: 200 }, () => generateSecretKey());
  const now = Math.floor(Date.now() / 1000);
  const events = [];
  for (let i = 0; i < notes; i++) {
    events.push(
      finalizeEvent(
        {
          kind: 1,
          created_at: now - Math.floor((i * 600) / notes),
          tags: [["t", `topic${i % 100}`]],
          content: `note ${i}: a chat message of ordinary length, with a few words in it.`,
        },
        authors[i % authors.length],
      ),
    );
  }
  return { events, authors: authors.map((k) => getPublicKey(k)) };
}

async function publish(url, events) {
  const ws = await open(url);
  let next = 0;
  let answered = 0;
  let refused = 0;
  await new Promise((resolve, reject) => {
    const send = () => {
      while (next < events.length && next - answered < 64) {
        ws.send(JSON.stringify(["EVENT", events[next++]]));
      }
    };
    ws.on("message", (data) => {
      const msg = JSON.parse(data.toString());
      if (msg[0] !== "OK") return;
      answered++;
      if (!msg[2]) refused++;
      if (answered === events.length) resolve();
      else send();
    });
    ws.once("error", reject);
    send();
  });
  ws.close();
  if (refused) throw new Error(`${url}: ${refused} notes refused`);
}

// Signing in JS takes about 3.5 ms a note: `--notes-file PATH` keeps them for the next run
// (a file holding a different number of notes is signed again).
function loadOrSignNotes() {
  const file = args["notes-file"];
  if (file && existsSync(file)) {
    const data = JSON.parse(readFileSync(file, "utf8"));
    if (data.events.length === notes) {
      console.log(`read ${notes} signed notes from ${file}`);
      return data;
    }
  }
  const started = performance.now();
  const data = makeNotes();
  console.log(`signed ${notes} notes in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  if (file) writeFileSync(file, JSON.stringify(data));
  return data;
}

// One connection that runs REQs one at a time and times each to its EOSE.
async function reader(url) {
  const ws = await open(url);
  const waiting = new Map();
  let events = 0;
  ws.on("message", (data) => {
    const text = data.toString();
    if (text.startsWith('["EVENT"')) {
      events++;
      return;
    }
    const msg = JSON.parse(text);
    if ((msg[0] === "EOSE" || msg[0] === "CLOSED") && waiting.has(msg[1])) {
      waiting.get(msg[1])(msg[0]);
      waiting.delete(msg[1]);
    }
  });
  let n = 0;
  return {
    events: () => events,
    async req(filter) {
      const id = `q${n++}`;
      const started = performance.now();
      const end = await new Promise((resolve) => {
        waiting.set(id, resolve);
        ws.send(JSON.stringify(["REQ", id, filter]));
      });
      const ended = performance.now();
      if (end !== "EOSE") throw new Error(`${url}: REQ ${JSON.stringify(filter)} was CLOSED`);
      ws.send(JSON.stringify(["CLOSE", id]));
      return { ms: ended - started, started, ended };
    },
    close: () => ws.close(),
  };
}

// The four shapes, the i-th instance of each.
function shapes(data) {
  const ids = data.events.map((e) => e.id);
  return {
    "kinds limit 50": () => ({ kinds: [1], limit: 50 }),
    "authors limit 20": (i) => ({ authors: [data.authors[i % data.authors.length]], limit: 20 }),
    "#t limit 20": (i) => ({ "#t": [`topic${i % 100}`], limit: 20 }),
    "ids x10": (i) => ({ ids: Array.from({ length: 10 }, (_, j) => ids[(i * 37 + j * 1009) % ids.length]) }),
  };
}

// `shapes` is a list of [label, filter maker]; the i-th REQ uses shape i mod their count.
async function measure(relay, shapes, count, conns) {
  const readers = await Promise.all(Array.from({ length: conns }, () => reader(relay.url)));
  const timings = [];
  const cpuBefore = cpuSeconds(relay.child.pid);
  const started = performance.now();
  let next = 0;
  await Promise.all(
    readers.map(async (r) => {
      while (next < count) {
        const i = next++;
        const [label, filter] = shapes[i % shapes.length];
        timings.push({ label, ...(await r.req(filter(i))) });
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpu = cpuSeconds(relay.child.pid) - cpuBefore;
  const events = readers.reduce((sum, r) => sum + r.events(), 0);
  readers.forEach((r) => r.close());
  // Let the observer deliver the last collections' entries.
  await sleep(10);
  const latencies = timings.map((t) => t.ms).sort((a, b) => a - b);
  const p50 = percentile(latencies, 50);
  const slow = timings.filter((t) => t.ms > 3 * p50);
  const untouched = timings.filter((t) => !touchedByGc(t)).map((t) => t.ms).sort((a, b) => a - b);
  // Each shape's own p50/p99 within a mixed run: which of them makes the tail.
  const byShape = Object.fromEntries(
    shapes.map(([label]) => {
      const own = timings.filter((t) => t.label === label).map((t) => t.ms).sort((a, b) => a - b);
      return [label, { p50: percentile(own, 50), p99: percentile(own, 99) }];
    }),
  );
  return {
    byShape,
    qps: count / seconds,
    p50,
    p99: percentile(latencies, 99),
    slow: slow.length,
    slowInGc: slow.filter(touchedByGc).length,
    p99NoGc: percentile(untouched, 99),
    cpuMs: (cpu * 1000) / count,
    eventsPerQuery: events / count,
  };
}

const row = (label, r) =>
  `${label.padEnd(40)} ${r.qps.toFixed(0).padStart(7)} q/s  p50 ${r.p50.toFixed(2).padStart(7)} ms` +
  `  p99 ${r.p99.toFixed(2).padStart(7)} ms  CPU ${r.cpuMs.toFixed(3).padStart(7)} ms/query` +
  `  (${r.eventsPerQuery.toFixed(1)} events)` +
  `\n${"".padEnd(40)} ${r.slow} over 3× p50, ${r.slowInGc} of them in a client GC;` +
  ` p99 of REQs no GC touched ${r.p99NoGc.toFixed(2)} ms` +
  (Object.keys(r.byShape).length > 1
    ? Object.entries(r.byShape)
        .map(([label, s]) => `\n${"".padEnd(40)} ${label}: p50 ${s.p50.toFixed(2)} ms, p99 ${s.p99.toFixed(2)} ms`)
        .join("")
    : "");

async function main() {
  const data = loadOrSignNotes();
  // Notes kept in --notes-file age: buzz refuses a created_at further than
  // `limits.max_clock_skew_secs` (900) from its clock, so the bound is widened to their age.
  const oldest = Math.min(...data.events.map((e) => e.created_at));
  const skew = Math.max(900, Math.floor(Date.now() / 1000) - oldest + 900);
  const env = { BUZZ__LIMITS__MAX_CLOCK_SKEW_SECS: String(skew) };
  const cpus = args["relay-cpus"];
  const relays = [await startBuzz(args["relay-bin"], args["database-url"], env, cpus)];
  if (args["peer-bin"]) relays.push(await startPeer(args["peer-bin"], cpus));
  const results = {};
  try {
    for (const relay of relays) {
      const t = performance.now();
      await publish(relay.url, data.events);
      console.log(`${relay.name}: published in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    }
    await sleep(1000);
    const byShape = Object.fromEntries(
      Object.entries(shapes(data)).filter(([label]) => !args.shape || label.includes(args.shape)),
    );
    if (!Object.keys(byShape).length) throw new Error(`--shape ${args.shape} matches no shape`);
    for (const relay of relays) {
      results[relay.name] = {};
      // Warm-up: caches and prepared statements, not measured.
      await measure(relay, Object.entries(byShape), 200, 1);
      for (const [label, filter] of Object.entries(byShape)) {
        const r = await measure(relay, [[label, filter]], single, 1);
        results[relay.name][label] = r;
        console.log(row(`${relay.name}: ${label}, 1 connection`, r));
      }
      if (warmup > 0) {
        const cold = await measure(relay, Object.entries(byShape), warmup, connections);
        console.log(row(`${relay.name}: warm-up, not counted (${connections} connections)`, cold));
      }
      const mixed = await measure(relay, Object.entries(byShape), requests, connections);
      results[relay.name].mixed = mixed;
      console.log(row(`${relay.name}: ${Object.keys(byShape).length} shapes, ${connections} connections`, mixed));
    }
    if (results["nostr-rs-relay"]) {
      console.log("\nbuzz / nostr-rs-relay (queries/s ratio, CPU per query ratio, p99/p50 of buzz):");
      for (const label of Object.keys(results.buzz)) {
        const [b, p] = [results.buzz[label], results["nostr-rs-relay"][label]];
        console.log(
          `${label.padEnd(20)} q/s ${(b.qps / p.qps).toFixed(2)}x  CPU ${(b.cpuMs / p.cpuMs).toFixed(2)}x` +
            `  buzz p99/p50 ${(b.p99 / b.p50).toFixed(2)}`,
        );
      }
    }
  } finally {
    stopAll(relays);
  }
}

main().catch((e) => {
  console.error(`error: ${e.message}`);
  process.exit(1);
});
