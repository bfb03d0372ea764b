// Reads flat as the community grows (issue 45), measured from outside: a stock client (ws,
// nostr-tools) in its own process against `buzz-relay` holding a history of each size.
//
//   node read-scale.mjs --relay-bin ../../target/release/buzz-relay \
//       --storage-bench ../../target/release/storage-bench [--sizes 20000,1000000] \
//       [--data-root /tmp/buzz-read-scale] [--notes-share 0.05] [--single 300] \
//       [--database-url-base postgres://postgres@127.0.0.1:5432] \
//       [--peer-bin nostr-rs-relay [--peer-bulkloader bulkloader] [--peer-single N] [--peer-warmup N]]
//
// For each size N (events of the history besides the channels' setup and the profiles):
// 1. `storage-bench --events M --notes K --profiles --keys-out …` writes the history once
//    into --data-root/hN/ (K = N × --notes-share community-wide kind-1 notes with `t`
//    tags, interleaved in time with M = N − K channel messages in 20 channels; the 50
//    authors' kind-0 profiles; the authors' keys), and a sample of it (`sample.json`:
//    channel ids, note ids spread over the whole history);
// 2. `buzz-relay import` loads it once into a data directory of its own under
//    --data-root/hN/ (SQLite), or with --database-url-base into a scratch PostgreSQL
//    database `buzz_scale_N` created here (`createdb`; then `VACUUM (ANALYZE)`: this
//    machine's PostgreSQL runs without autovacuum); a marker file skips both next time;
// 3. starts one relay process on it and runs each shape below --single times, one REQ
//    (or NEG-OPEN) at a time on one connection, after a warm-up of every shape that is
//    not counted; prints each shape's p50/p99 (request to EOSE / CLOSED / NEG-MSG) and
//    the relay's CPU per query (utime + stime from /proc/<pid>/stat; on PostgreSQL the
//    database server's CPU is not in it);
// and at the end, per shape, the p50 at each size, the ratio of the largest to the
// smallest and whether it is ≤ 1.5× and ≤ 5 ms (issue 45's acceptance).
//
// Anonymous shapes are read before AUTH; member shapes on a connection authenticated
// (NIP-42) as storage-bench's first author, who created channel 0 and joined every other.
//
// --peer-bin <nostr-rs-relay> measures nostr-rs-relay on the same history beside each
// size (SQLite; its own `bulkloader`, found next to it or given with --peer-bulkloader,
// loads the history once into --data-root/hN/peer/, and the `sqlite3` shell adds the tag
// rows it leaves out): every REQ shape, read without AUTH (nostr-rs-relay keeps no
// channel scopes), and no NEG-OPEN (it has no NIP-77).
// The scratch databases are kept for EXPLAIN; drop them with
// `dropdb -h 127.0.0.1 -U postgres buzz_scale_N` (or run with --drop).
import { spawn, spawnSync } from "node:child_process";
import { createReadStream, createWriteStream, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { tmpdir } from "node:os";
import { finalizeEvent, getPublicKey } from "nostr-tools/pure";
import { hexToBytes } from "nostr-tools/utils";
import { commandLine } from "./args.mjs";
import { cpuSeconds, freePort, percentile, waitForRelay } from "./relays.mjs";
import { Client, newKey, pubkeyOf } from "./wire.mjs";

const args = commandLine();
if (!args["relay-bin"]) throw new Error("--relay-bin <buzz-relay> is required");
if (!args["storage-bench"]) throw new Error("--storage-bench <storage-bench> is required");
const peerBin = args["peer-bin"] ? resolve(args["peer-bin"]) : null;
const peerBulkloader = peerBin ? resolve(args["peer-bulkloader"] ?? join(dirname(peerBin), "bulkloader")) : null;
const relayBin = resolve(args["relay-bin"]);
const storageBench = resolve(args["storage-bench"]);
const sizes = (args.sizes ?? "20000,1000000").split(",").map(Number);
const dataRoot = resolve(args["data-root"] ?? join(tmpdir(), "buzz-read-scale"));
const notesShare = Number(args["notes-share"] ?? 0.05);
const single = Number(args.single ?? 300);
const warmup = Number(args.warmup ?? 30);
// nostr-rs-relay walks its time index for several shapes: fewer requests keep a 1M run short.
const peerSingle = Number(args["peer-single"] ?? single);
const peerWarmup = Number(args["peer-warmup"] ?? warmup);
const pgBase = args["database-url-base"]?.replace(/\/+$/, "");
const backend = pgBase ? "postgres" : "sqlite";
const pg = pgBase ? new URL(pgBase) : null;
const pgFlags = pg ? ["-h", pg.hostname, "-p", pg.port || "5432", "-U", decodeURIComponent(pg.username || "postgres")] : [];

const run = (bin, argv, options = {}) => {
  const done = spawnSync(bin, argv, { stdio: ["ignore", "inherit", "inherit"], ...options });
  if (done.status !== 0) throw new Error(`${bin} ${argv.join(" ")} failed (${done.status})`);
};
const seconds = (from) => ((performance.now() - from) / 1000).toFixed(1);

// 1. The history of `size` events, written once, and what the shapes need from it.
async function history(size) {
  const dir = join(dataRoot, `h${size}`);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "history.jsonl");
  const keysFile = join(dir, "keys.txt");
  const written = join(dir, "written");
  const notes = Math.round(size * notesShare);
  if (!existsSync(written)) {
    const started = performance.now();
    const out = createWriteStream(file);
    await new Promise((res, rej) => out.once("open", res).once("error", rej));
    const child = spawn(
      storageBench,
      ["--events", String(size - notes), "--notes", String(notes), "--profiles", "--keys-out", keysFile],
      { stdio: ["ignore", out, "inherit"] },
    );
    const code = await new Promise((res) => child.once("exit", res));
    out.close();
    if (code !== 0) throw new Error(`storage-bench failed (${code})`);
    writeFileSync(written, `${size - notes} messages, ${notes} notes\n`);
    console.log(`h${size}: storage-bench wrote ${size - notes} messages and ${notes} notes in ${seconds(started)} s`);
  }
  const sampleFile = join(dir, "sample.json");
  if (!existsSync(sampleFile)) {
    // Channel ids (storage-bench names them "channel N") and every note id; 200 of the
    // notes, evenly spread over the history, are kept.
    const channels = [];
    const noteIds = [];
    for await (const line of createInterface({ input: createReadStream(file), crlfDelay: Infinity })) {
      if (line.includes('"kind":1,') || line.includes('"kind":9007,')) {
        const e = JSON.parse(line);
        if (e.kind === 1) noteIds.push(e.id);
        else if (e.kind === 9007) {
          const name = e.tags.find((t) => t[0] === "name")?.[1];
          channels[Number(name.split(" ")[1])] = e.tags.find((t) => t[0] === "h")[1];
        }
      }
    }
    const step = Math.max(1, Math.floor(noteIds.length / 200));
    const sample = { channels, noteIds: noteIds.filter((_, i) => i % step === 0).slice(0, 200), notes: noteIds.length };
    writeFileSync(sampleFile, JSON.stringify(sample));
  }
  const keys = readFileSync(keysFile, "utf8").trim().split("\n").map(hexToBytes);
  return { dir, file, keys, ...JSON.parse(readFileSync(sampleFile, "utf8")) };
}

// 2. Imported once into this backend; the relay's data directory and database URL.
function imported(size, h) {
  const dataDir = join(h.dir, backend);
  mkdirSync(dataDir, { recursive: true });
  const database = `buzz_scale_${size}`;
  const databaseUrl = pg ? `${pgBase}/${database}` : `sqlite://${dataDir}/buzz.db`;
  const marker = join(dataDir, "imported");
  if (!existsSync(marker)) {
    if (pg) {
      spawnSync("dropdb", [...pgFlags, "--if-exists", database], { stdio: "inherit" });
      run("createdb", [...pgFlags, database]);
    } else {
      for (const f of readdirSync(dataDir).filter((f) => f.startsWith("buzz.db"))) {
        throw new Error(`${join(dataDir, f)} exists without ${marker}: remove it first`);
      }
    }
    const started = performance.now();
    run(relayBin, ["import", h.file], { cwd: dataDir, env: relayEnv(dataDir, databaseUrl) });
    // What autovacuum (on by default, off on this machine) does after a bulk insert:
    // statistics, and the visibility map that lets an index-only scan skip the table
    // (the NIP-77 set read 50,000 heap pages without it at 1M: 201 → 20 ms).
    if (pg) run("psql", [...pgFlags, "-d", database, "-q", "-c", "VACUUM (ANALYZE)"]);
    writeFileSync(marker, `${databaseUrl}\n`);
    console.log(`h${size}: imported into ${backend} in ${seconds(started)} s`);
  }
  return { dataDir, databaseUrl, database };
}

function relayEnv(dataDir, databaseUrl, port = 0) {
  return {
    ...process.env,
    BUZZ__SERVER__BIND: `127.0.0.1:${port}`,
    BUZZ__RELAY__DATA_DIR: dataDir,
    BUZZ__STORAGE__DATABASE_URL: databaseUrl,
    BUZZ__METRICS__ENABLED: "false",
    RUST_LOG: "warn",
  };
}

// The shapes, each a maker of its i-th request: ["req", filter] or ["neg", filter], read
// anonymously or as the member.
function shapes(h) {
  const unknown = Array.from({ length: 20 }, () => pubkeyOf(newKey()));
  const authors = h.keys.map((k) => getPublicKey(k));
  const ids = h.noteIds;
  const channel = (i) => h.channels[i % h.channels.length];
  return [
    ["anonymous", '{"limit":1}', () => ["req", { limit: 1 }]],
    ["anonymous", '{"authors":[unknown],"limit":1}', (i) => ["req", { authors: [unknown[i % 20]], limit: 1 }]],
    ["anonymous", '{"kinds":[0],"limit":1}', () => ["req", { kinds: [0], limit: 1 }]],
    ["member", '{"kinds":[1],"limit":1}', () => ["req", { kinds: [1], limit: 1 }]],
    ["anonymous", "NEG-OPEN {}", () => ["neg", {}]],
    // The same open right after a write. A profile (kind 0, replaced each time so the
    // history keeps its size; called "after a write" in earlier runs) replaces a row:
    // the set kept from the open before is read and sealed again. A note (kind 1, in
    // this set) only appends: on SQLite the kept set takes in the rows appended since.
    ["anonymous", "NEG-OPEN {} after a profile", () => ["neg-after-profile", {}]],
    ["anonymous", "NEG-OPEN {} after a note", () => ["neg-after-note", {}]],
    ["member", '{"kinds":[9],"#h":[ch],"limit":20}', (i) => ["req", { kinds: [9], "#h": [channel(i)], limit: 20 }]],
    ["member", '{"kinds":[9],"limit":1}', () => ["req", { kinds: [9], limit: 1 }]],
    ["anonymous", '{"kinds":[1],"limit":50}', () => ["req", { kinds: [1], limit: 50 }]],
    ["anonymous", '{"authors":[a],"limit":20}', (i) => ["req", { authors: [authors[i % authors.length]], limit: 20 }]],
    ["anonymous", '{"#t":[x],"limit":20}', (i) => ["req", { "#t": [`topic${i % 20}`], limit: 20 }]],
    [
      "anonymous",
      '{"ids":[10 ids]}',
      (i) => ["req", { ids: Array.from({ length: 10 }, (_, j) => ids[(i * 7 + j * 19) % ids.length]) }],
    ],
  ];
}

// One request, timed to the end of its answer: { ms, events, end }. `writer` publishes
// the untimed write of a "neg-after-…" request. Profiles count up a second at a time (a
// replacement must be newer) from 800 s before the relay's measurement began, within its
// 900 s skew bound however long the import before took.
let profileAt = 0;
async function once(client, [how, filter], i, writer) {
  if (how === "neg-after-profile" || how === "neg-after-note") {
    const write = how === "neg-after-profile"
      ? { kind: 0, created_at: ++profileAt, tags: [], content: JSON.stringify({ name: `reader ${i}` }) }
      : { kind: 1, created_at: Math.floor(Date.now() / 1000), tags: [], content: `note ${i} ${Math.random()}` };
    const [ok, text] = await writer.client.publish(finalizeEvent(write, writer.key));
    if (!ok) throw new Error(`the ${how} write was refused: ${text}`);
    how = "neg";
  }
  const before = client.unparsedEvents;
  const started = performance.now();
  let end;
  if (how === "neg") {
    const id = `n${i}`;
    end = await client.negOpen(id, filter);
    const ms = performance.now() - started;
    if (end === "NEG-MSG") client.negClose(id);
    return { ms, events: 0, end };
  }
  ({ end } = await client.req([filter], 60_000));
  return { ms: performance.now() - started, events: client.unparsedEvents - before, end };
}

const endOf = (end) => (end === "EOSE" || end === "NEG-MSG" ? end : `CLOSED/ERR ${String(end).split(":")[0]}:`);

// 3. One relay on the imported history; every shape measured in turn.
async function measure(size, h, db) {
  const port = await freePort();
  const child = spawn(relayBin, [], {
    cwd: db.dataDir,
    env: relayEnv(db.dataDir, db.databaseUrl, port),
    stdio: ["ignore", "ignore", "inherit"],
  });
  return measureOn({ name: backend, child, url: `ws://127.0.0.1:${port}/`, auth: true }, size, h, single, warmup);
}

// 3'. nostr-rs-relay on the same history, loaded once with its bulkloader.
async function measurePeer(size, h) {
  const dir = join(h.dir, "peer");
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  writeFileSync(
    join(dir, "config.toml"),
    `[info]\nrelay_url = "ws://127.0.0.1:${port}/"\nname = "peer"\n` +
      `[database]\ndata_directory = "${dir}"\n` +
      `[network]\naddress = "127.0.0.1"\nport = ${port}\n` +
      `[limits]\nmax_event_bytes = 524288\n`,
  );
  const start = () =>
    spawn(peerBin, ["--config", join(dir, "config.toml"), "--db", dir], {
      cwd: dir,
      env: { ...process.env, RUST_LOG: "warn" },
      stdio: ["ignore", "ignore", "inherit"],
    });
  const url = `ws://127.0.0.1:${port}/`;
  const marker = join(dir, "loaded");
  if (!existsSync(marker)) {
    // The bulkloader writes only to a database the relay has created (its schema).
    const first = start();
    await waitForRelay(url, first);
    first.kill("SIGTERM");
    await new Promise((res) => (first.exitCode !== null ? res() : first.once("exit", res)));
    const started = performance.now();
    const input = createReadStream(h.file);
    await new Promise((res, rej) => input.once("open", res).once("error", rej));
    const loader = spawn(peerBulkloader, [], { cwd: dir, stdio: [input, "ignore", "inherit"] });
    const code = await new Promise((res) => loader.once("exit", res));
    if (code !== 0) throw new Error(`nostr-rs-relay's bulkloader failed (${code})`);
    // Its bulkloader (0.8.12) writes no tag rows, so `#h` and `#t` would answer nothing.
    // The single-letter tags whose values are not hex (channel ids, topics: every tag a
    // shape reads) are added as the relay itself would index them.
    run("sqlite3", [
      join(dir, "nostr.db"),
      "INSERT INTO tag (event_id, name, value, created_at, kind) " +
        "SELECT e.id, json_extract(t.value, '$[0]'), json_extract(t.value, '$[1]'), e.created_at, e.kind " +
        "FROM event e, json_each(json_extract(e.content, '$.tags')) t " +
        "WHERE length(json_extract(t.value, '$[0]')) = 1 AND json_extract(t.value, '$[1]') GLOB '*[^0-9a-f]*';",
    ]);
    writeFileSync(marker, "loaded\n");
    console.log(`h${size}: loaded into nostr-rs-relay in ${seconds(started)} s`);
  }
  return measureOn({ name: "nostr-rs-relay", child: start(), url, auth: false }, size, h, peerSingle, peerWarmup);
}

// Every shape on one running relay; the relay is stopped at the end. Without `auth` the
// member's shapes are read unauthenticated and NEG-OPEN shapes are left out.
async function measureOn({ name, child, url, auth }, size, h, single, warmup) {
  try {
    await waitForRelay(url, child);
    const anonymous = await Client.connect(url, undefined, { light: true });
    const member = await Client.connect(url, auth ? h.keys[0] : undefined, { light: true });
    const clientOf = (who) => (who === "member" ? member : anonymous);
    // The writes before NEG-OPENs come from a key of their own, new each run, so its
    // profiles count up from 800 s ago whatever earlier runs left in the history.
    const writerKey = newKey();
    const writer = { client: auth ? await Client.connect(url, writerKey, { light: true }) : member, key: writerKey };
    profileAt = Math.floor(Date.now() / 1000) - 800;
    const list = shapes(h).filter(([, label]) => auth || !label.startsWith("NEG-OPEN"));
    for (let i = 0; i < warmup; i++) {
      for (const [who, , make] of list) await once(clientOf(who), make(i), i, writer);
    }
    console.log(
      `\n${name}, ${size} events (${h.notes} notes, ${h.channels.length} channels), relay pid ${child.pid}, ` +
        `${single} requests per shape, one at a time on one connection:`,
    );
    const results = {};
    for (const [who, label, make] of list) {
      const client = clientOf(who);
      const timings = [];
      const ends = new Map();
      let events = 0;
      const cpu0 = cpuSeconds(child.pid);
      for (let i = 0; i < single; i++) {
        const t = await once(client, make(warmup + i), i, writer);
        timings.push(t.ms);
        events += t.events;
        ends.set(endOf(t.end), (ends.get(endOf(t.end)) ?? 0) + 1);
      }
      const cpuMs = ((cpuSeconds(child.pid) - cpu0) * 1000) / single;
      timings.sort((a, b) => a - b);
      const r = { p50: percentile(timings, 50), p99: percentile(timings, 99), cpuMs, events: events / single };
      results[`${who} ${label}`] = r;
      console.log(
        `${`${who} ${label}`.padEnd(46)} p50 ${r.p50.toFixed(2).padStart(7)} ms  p99 ${r.p99.toFixed(2).padStart(7)} ms` +
          `  CPU ${cpuMs.toFixed(3).padStart(7)} ms/query  ${(events / single).toFixed(1)} events, ` +
          [...ends].map(([k, n]) => `${k} ${n}`).join(", "),
      );
    }
    anonymous.close();
    member.close();
    if (writer.client !== member) writer.client.close();
    return results;
  } finally {
    child.kill("SIGTERM");
    await new Promise((res) => (child.exitCode !== null ? res() : child.once("exit", res)));
  }
}

const all = {};
const peer = {};
for (const size of sizes) {
  const h = await history(size);
  const db = imported(size, h);
  all[size] = await measure(size, h, db);
  if (peerBin) peer[size] = await measurePeer(size, h);
}
if (args.drop !== undefined && pg) {
  for (const size of sizes) run("dropdb", [...pgFlags, "--if-exists", `buzz_scale_${size}`]);
}

if (sizes.length > 1) {
  const [small, large] = [sizes[0], sizes[sizes.length - 1]];
  console.log(`\n${backend}: shape: p50 at ${small}, p50 at ${large}, ratio, ≤ 1.5×?, ≤ 5 ms?`);
  for (const label of Object.keys(all[small])) {
    const [a, b] = [all[small][label].p50, all[large][label].p50];
    console.log(
      `${label.padEnd(46)} ${a.toFixed(2).padStart(7)} ms  ${b.toFixed(2).padStart(7)} ms  ${(b / a).toFixed(2).padStart(5)}×` +
        `  ${b / a <= 1.5 ? "yes" : "NO "}  ${b <= 5 ? "yes" : "NO"}`,
    );
  }
}

if (peerBin) {
  for (const size of sizes) {
    console.log(`\n${size} events: shape: p50 ${backend}, p50 nostr-rs-relay, ratio (${backend} / nostr-rs-relay)`);
    for (const label of Object.keys(all[size])) {
      const ours = all[size][label];
      const theirs = peer[size][label];
      // A ratio of answers of different sizes says nothing: say so instead.
      const differ = theirs && theirs.events !== ours.events ? `  (answers differ: ${ours.events} vs ${theirs.events} events)` : "";
      console.log(
        `${label.padEnd(46)} ${ours.p50.toFixed(2).padStart(7)} ms  ` +
          (theirs === undefined
            ? "    n/a (no NIP-77)"
            : `${theirs.p50.toFixed(2).padStart(7)} ms  ${(ours.p50 / theirs.p50).toPrecision(3).padStart(6)}×${differ}`),
      );
    }
  }
}
