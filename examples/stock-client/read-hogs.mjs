// Reads that cannot hog the relay, measured from outside: a stock client (ws, nostr-tools)
// in its own process against a `buzz-relay` holding a team's history.
//
//   target/release/storage-bench --events 300000 > /tmp/h300k.jsonl
//   node read-hogs.mjs --relay-bin ../../target/release/buzz-relay --history /tmp/h300k.jsonl \
//       [--data-dir /tmp/hogs-sqlite] [--database-url postgres://postgres@127.0.0.1:5432/<scratch>] \
//       [--seconds 10] [--rows alone,count,search-count,wide-req,http-query,search-memory,neg]
//
// The history is imported once into --data-dir (kept, with the relay key the import
// signed with, so later runs skip the import; a PostgreSQL --database-url must name an
// empty scratch database the first time). Then, against one relay process:
// - a bystander (one member) sends {"kinds":[9],"#h":[ch],"limit":20} every 100 ms for
//   --seconds, alone and then while 8 other connections loop one heavy read each:
//   `count` COUNT {"kinds":[9]}; `search-count` a COUNT of 16 search filters;
//   `wide-req` a REQ of 16 wide filters with limit 500; `http-query` 32 parallel
//   POST /query from one key, each the 16 wide filters. The hogs run in threads of
//   their own (`hog-worker.mjs`) and count the events they are sent without parsing
//   them, so the client's own work never delays the bystander's timer. Each row prints the bystander's
//   p50/p99, how many of its REQs got no answer within 10 s, and what the hogs got
//   (answers, refusals by prefix, timeouts) with the relay's CPU;
// - `search-memory`: a member posts 300 messages of 250 KB in a public channel of its own,
//   then sends one REQ of 16 filters {"search":<its word>,"#h":[ch],"limit":500,"since":i};
//   prints the relay's peak RSS growth (VmHWM after, peak reset first) and the answer;
// - `neg`: one key opens as many NIP-77 sessions as the relay lets it (whole-community and
//   one-channel sets over 5 connections), then a second member opens one 15k-record
//   channel set: prints whether the victim's NEG-OPEN succeeded and how long it took.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { finalizeEvent } from "nostr-tools/pure";
import { commandLine } from "./args.mjs";
import { cpuSeconds, freePort, percentile, sleep, waitForRelay } from "./relays.mjs";
import { Worker } from "node:worker_threads";
import { Client, newKey } from "./wire.mjs";

const args = commandLine();
if (!args["relay-bin"]) throw new Error("--relay-bin <buzz-relay> is required");
const relayBin = resolve(args["relay-bin"]);
const seconds = Number(args.seconds ?? 10);
const rows = (args.rows ?? "alone,count,search-count,wide-req,http-query,search-memory,neg").split(",");
const dataDir = resolve(args["data-dir"] ?? mkdtempSync(join(tmpdir(), "buzz-hogs-")));
mkdirSync(dataDir, { recursive: true });
const databaseUrl = args["database-url"] ?? `sqlite://${dataDir}/buzz.db`;
const relayEnv = (port) => ({
  ...process.env,
  BUZZ__SERVER__BIND: `127.0.0.1:${port ?? 0}`,
  BUZZ__RELAY__DATA_DIR: dataDir,
  BUZZ__STORAGE__DATABASE_URL: databaseUrl,
  BUZZ__METRICS__ENABLED: "false",
  RUST_LOG: "warn",
});

// 1. The history, imported once.
const marker = join(dataDir, "imported");
if (args.history && !existsSync(marker)) {
  const started = Date.now();
  const imported = spawnSync(relayBin, ["import", resolve(args.history)], {
    cwd: dataDir,
    env: relayEnv(),
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (imported.status !== 0) throw new Error(`import failed (${imported.status})`);
  writeFileSync(marker, `${databaseUrl}\n`);
  console.log(`imported ${args.history} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

// 2. One relay process on it.
const port = await freePort();
const child = spawn(relayBin, [], { cwd: dataDir, env: relayEnv(port), stdio: ["ignore", "ignore", "inherit"] });
const url = `ws://127.0.0.1:${port}/`;
const httpBase = `http://127.0.0.1:${port}`;
await waitForRelay(url, child);
const rssKb = (field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))[1]);

const bystanderKey = newKey();
const setup = await Client.connect(url, bystanderKey);
// The history's channels (storage-bench names them "channel N"), never one a previous
// run's search-memory row filled with 250 KB messages.
const tagOf = (e, name) => e.tags.find((t) => t[0] === name)?.[1];
const channels = [
  ...new Set(
    (await setup.req([{ kinds: [39000], limit: 500 }])).events
      .filter((e) => tagOf(e, "name")?.startsWith("channel "))
      .map((e) => tagOf(e, "d")),
  ),
].sort();
if (channels.length === 0) throw new Error("no channels: give --history (a storage-bench file)");
console.log(`relay pid ${child.pid}, ${databaseUrl.split(":")[0]}, ${channels.length} channels`);
const nowSecs = Math.floor(Date.now() / 1000);
const sixteen = (make) => Array.from({ length: 16 }, (_, i) => make(i));
const wideFilters = sixteen((i) => ({ kinds: [9], limit: 500, until: nowSecs - i * 86_400 }));
const searchFilters = sixteen((i) => ({ search: "message", kinds: [9], since: nowSecs - 40 * 86_400 + i }));

const prefixOf = (text) => (typeof text === "string" ? text.split(":")[0] : String(text));
const tally = (map, key) => map.set(key, (map.get(key) ?? 0) + 1);
const show = (map) => [...map].map(([k, n]) => `${k} ${n}`).join(", ") || "none";

// The bystander: a REQ every 100 ms for --seconds, each waited for up to 10 s.
async function bystander(client) {
  const latencies = [];
  let unanswered = 0;
  const ends = new Map();
  const pending = [];
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    const started = performance.now();
    pending.push(
      client
        .req([{ kinds: [9], "#h": [channels[0]], limit: 20 }])
        .then(({ end }) => {
          latencies.push(performance.now() - started);
          tally(ends, prefixOf(end));
        })
        .catch(() => unanswered++),
    );
    await sleep(100);
  }
  await Promise.all(pending);
  latencies.sort((a, b) => a - b);
  return { latencies, unanswered, ends };
}

// The heavy reads each hog loops, as filters.
const hogFilters = {
  count: [{ kinds: [9] }],
  "search-count": searchFilters,
  "wide-req": wideFilters,
  "http-query": wideFilters,
};

// 8 hogs, each a thread of its own (one thread of 32 parallel requests for
// `http-query`), looping `name` while the bystander measures.
async function hogRow(name) {
  const threads = name === "http-query" ? 1 : 8;
  const hogs = Array.from(
    { length: threads },
    () =>
      new Worker(new URL("./hog-worker.mjs", import.meta.url), {
        workerData: { url, httpBase, shape: name, filters: hogFilters[name], parallel: 32 },
      }),
  );
  const reports = hogs.map((w) => new Promise((resolve) => w.once("message", resolve)));
  await sleep(1000); // the hogs are connected and their reads queued before the bystander starts
  const cpu0 = cpuSeconds(child.pid);
  const seen = await bystander(setup);
  const cpu = cpuSeconds(child.pid) - cpu0;
  hogs.forEach((w) => w.postMessage("stop"));
  const outcomes = new Map();
  for (const report of await Promise.all(reports)) {
    for (const [k, n] of Object.entries(report)) outcomes.set(k, (outcomes.get(k) ?? 0) + n);
  }
  await Promise.all(hogs.map((w) => w.terminate()));
  return { ...seen, outcomes, cpu };
}

function printRow(name, { latencies, unanswered, ends, outcomes, cpu }) {
  const p = (q) => percentile(latencies, q).toFixed(1);
  console.log(
    `${name.padEnd(13)} bystander p50 ${p(50)} ms  p99 ${p(99)} ms  answered ${latencies.length}` +
      ` (${show(ends)})  no answer in 10 s: ${unanswered}` +
      (outcomes ? `  | hogs: ${show(outcomes)}  | relay CPU ${cpu.toFixed(1)} s` : ""),
  );
}

async function searchMemory() {
  const key = newKey();
  const attacker = await Client.connect(url, key);
  const channel = crypto.randomUUID();
  const signed = (kind, tags, content) => finalizeEvent({ kind, created_at: Math.floor(Date.now() / 1000), tags, content }, key);
  const [created, why] = await attacker.publish(signed(9007, [["h", channel], ["name", "hog"]], ""));
  if (!created) throw new Error(`channel refused: ${why}`);
  const body = ("hogword " + "x".repeat(56) + " ").repeat(Math.floor(250_000 / 65));
  const refusals = new Map();
  for (let i = 0; i < 300; i++) {
    const [ok, text] = await attacker.publish(signed(9, [["h", channel]], `${i} ${body}`));
    if (!ok) tally(refusals, prefixOf(text));
  }
  writeFileSync(`/proc/${child.pid}/clear_refs`, "5"); // reset the peak (VmHWM)
  const before = rssKb("VmRSS");
  const cpu0 = cpuSeconds(child.pid);
  const started = performance.now();
  let answer;
  try {
    const { events, end } = await attacker.req(
      sixteen((i) => ({ search: "hogword", "#h": [channel], limit: 500, since: i })),
      120_000,
    );
    answer = `${events.length} events, then ${end}`;
  } catch (e) {
    answer = e.message;
  }
  const ms = performance.now() - started;
  console.log(
    `search-memory posted 300 × 250 KB (refused: ${show(refusals)}); one 16-filter search REQ: ${answer} in ${ms.toFixed(0)} ms;` +
      ` relay peak RSS growth ${((rssKb("VmHWM") - before) / 1024).toFixed(0)} MB, CPU ${(cpuSeconds(child.pid) - cpu0).toFixed(1)} s`,
  );
  attacker.close();
}

async function neg() {
  const key = newKey();
  const held = new Map();
  const connections = await Promise.all(Array.from({ length: 5 }, () => Client.connect(url, key)));
  let n = 0;
  for (const c of connections) {
    for (let i = 0; i < 8; i++) {
      const filter = n < 6 ? {} : { kinds: [9], "#h": [channels[1 % channels.length]] };
      const answer = await c.negOpen(`a${n++}`, filter);
      tally(held, answer === "NEG-MSG" ? "open" : prefixOf(answer));
    }
  }
  const victim = await Client.connect(url, newKey());
  const started = performance.now();
  const answer = await victim.negOpen("victim", { kinds: [9], "#h": [channels[2 % channels.length]] });
  console.log(
    `neg           attacker's opens: ${show(held)}; victim's 15k-record NEG-OPEN: ${answer === "NEG-MSG" ? "succeeded" : answer}` +
      ` in ${(performance.now() - started).toFixed(0)} ms`,
  );
  victim.close();
  connections.forEach((c) => c.close());
}

try {
  for (const row of rows) {
    if (row === "alone") printRow("alone", await bystander(setup));
    else if (row === "search-memory") await searchMemory();
    else if (row === "neg") await neg();
    else printRow(row, await hogRow(row));
  }
} finally {
  setup.close();
  child.kill("SIGTERM");
}
