// Where an idle connection's bytes go: the relay's RSS for --connections connections held
// at one stage of a team-chat connection's life, so the stages' differences say what each
// step costs (idle-connections.mjs measures the whole and delivery; this one only memory).
//
//   node idle-stages.mjs --relay-bin ../../target/release/buzz-relay \
//       --stage ws|auth|req [--connections 10000] [--batch 100] [--env KEY=VALUE,...]
//   node idle-stages.mjs --url ws://127.0.0.1:7777/ --pid <relay pid> --stage req --hold 60
//
// Stages: `ws` upgrades and reads the AUTH challenge, nothing more; `auth` also
// authenticates (NIP-42, a key per connection) and waits for its OK; `req` authenticates
// and at once opens one REQ `{"kinds":[1],"limit":1}` (on an empty database: no events),
// waiting for its EOSE — as idle-worker.mjs does, so it also measures nostr-rs-relay
// (named with --url and --pid), which answers no accepted AUTH. The relay is started alone
// on a fresh SQLite database (`--env` adds variables to its environment, e.g. allocator
// options), or an already running one is named with --url and --pid. Prints VmRSS before,
// after (3 s after the last connection opened) and per connection, with the anonymous
// part of /proc/<pid>/smaps_rollup; --hold keeps the connections open that many seconds
// more (to look at the process meanwhile). The client holds a descriptor per connection:
// raise `ulimit -n` first.
import WebSocket from "ws";
import { readFileSync } from "node:fs";
import { generateSecretKey } from "nostr-tools/pure";
import { authEvent } from "./wire.mjs";
import { commandLine } from "./args.mjs";
import { sleep, startBuzz, stopAll } from "./relays.mjs";

const args = commandLine();
const connections = Number(args.connections ?? 10000);
const batch = Number(args.batch ?? 100);
const stage = args.stage ?? "req";
const hold = Number(args.hold ?? 0);
if (!["ws", "auth", "req"].includes(stage)) throw new Error(`--stage ws|auth|req, not ${stage}`);

// kB figures of the process: VmRSS from status, Anonymous from smaps_rollup.
const memory = (pid) => {
  const field = (text, name) =>
    Number(text.split("\n").find((l) => l.startsWith(`${name}:`))?.split(/\s+/)[1] ?? NaN);
  return {
    rss: field(readFileSync(`/proc/${pid}/status`, "utf8"), "VmRSS"),
    anon: field(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"), "Anonymous"),
  };
};

// One connection taken to `stage`; resolves with the socket once there.
function connect(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    const key = generateSecretKey();
    let authId = null;
    ws.on("error", reject);
    ws.on("message", (data) => {
      const message = JSON.parse(data);
      if (message[0] === "AUTH" && authId === null) {
        if (stage === "ws") return resolve(ws);
        const event = authEvent(url, message[1], key);
        authId = event.id;
        ws.send(JSON.stringify(["AUTH", event]));
        // The REQ follows at once, as in idle-worker.mjs: relays serve a connection's
        // messages in order, and nostr-rs-relay sends no OK for an accepted AUTH.
        if (stage === "req") ws.send(JSON.stringify(["REQ", "live", { kinds: [1], limit: 1 }]));
      } else if (message[0] === "OK" && message[1] === authId) {
        if (!message[2]) return reject(new Error(`AUTH refused: ${message[3]}`));
        if (stage === "auth") return resolve(ws);
      } else if (message[0] === "EOSE") {
        resolve(ws);
      } else if (message[0] === "CLOSED") {
        reject(new Error(`subscription closed: ${message[2]}`));
      }
    });
  });
}

async function main() {
  let relay = null;
  let url = args.url;
  let pid = Number(args.pid);
  if (!url) {
    if (!args["relay-bin"]) throw new Error("--relay-bin <buzz-relay> or --url and --pid");
    const env = Object.fromEntries(
      (args.env ?? "")
        .split(",")
        .filter(Boolean)
        .map((pair) => pair.split("=")),
    );
    relay = await startBuzz(args["relay-bin"], undefined, env);
    url = relay.url;
    pid = relay.child.pid;
  }
  try {
    await sleep(1000);
    const before = memory(pid);
    const sockets = [];
    const started = Date.now();
    for (let i = 0; i < connections; i += batch) {
      const n = Math.min(batch, connections - i);
      sockets.push(...(await Promise.all(Array.from({ length: n }, () => connect(url)))));
    }
    const openSecs = (Date.now() - started) / 1000;
    await sleep(3000);
    const after = memory(pid);
    const per = (k) => ((after[k] - before[k]) / connections).toFixed(2);
    console.log(
      `stage ${stage}, ${connections} connections (opened in ${openSecs.toFixed(1)} s): ` +
        `RSS ${(before.rss / 1024).toFixed(1)} → ${(after.rss / 1024).toFixed(1)} MB, ` +
        `${per("rss")} KB per connection (anonymous ${per("anon")} KB)`,
    );
    if (hold > 0) {
      console.log(`holding ${hold} s (relay pid ${pid})`);
      await sleep(hold * 1000);
    }
    const closed = sockets.filter((ws) => ws.readyState !== WebSocket.OPEN).length;
    if (closed) console.log(`closed by the relay meanwhile: ${closed}`);
    sockets.forEach((ws) => ws.terminate());
  } finally {
    if (relay) stopAll([relay]);
  }
}

main().catch((e) => {
  console.error(`error: ${e.message}`);
  process.exit(1);
});
