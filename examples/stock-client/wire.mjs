// A small NIP-01 client over `ws` for the attack measurements: NIP-42 AUTH when the relay
// asks, REQ answers collected to EOSE or CLOSED, COUNT, NIP-77 opens, and NIP-98 signed
// `POST /query`. nostr-tools signs; nothing here is the relay's code.
import WebSocket from "ws";
import { createHash, randomUUID } from "node:crypto";
import { finalizeEvent, generateSecretKey, getPublicKey } from "nostr-tools/pure";
// nostr-tools ships nip77 without a package export entry: load the file itself.
const { Negentropy, NegentropyStorageVector } = await import(
  new URL("./node_modules/nostr-tools/lib/esm/nip77.js", import.meta.url)
);

const now = () => Math.floor(Date.now() / 1000);

// A NIP-42 AUTH event answering `challenge` from the relay at `url`, signed by `secretKey`.
export const authEvent = (url, challenge, secretKey) =>
  finalizeEvent({ kind: 22242, created_at: now(), tags: [["relay", url], ["challenge", challenge]], content: "" }, secretKey);

export class Client {
  // Open a connection to `url` and, when `secretKey` is given, authenticate (NIP-42) with
  // it in answer to the relay's challenge.
  // `light`: EVENT messages are counted, not parsed (a load generator's connections,
  // whose own parsing would otherwise be the bottleneck on a small box).
  static async connect(url, secretKey = undefined, { light = false } = {}) {
    const ws = new WebSocket(url, { maxPayload: 256 * 1024 * 1024 });
    const client = new Client(url, ws, light);
    await new Promise((resolve, reject) => {
      ws.once("open", resolve);
      ws.once("error", reject);
    });
    if (secretKey) await client.auth(secretKey);
    return client;
  }

  constructor(url, ws, light = false) {
    this.url = url;
    this.ws = ws;
    this.light = light;
    this.unparsedEvents = 0;
    this.waiting = [];
    this.challenge = null;
    this.challenged = new Promise((resolve) => (this.onChallenge = resolve));
    this.closed = new Promise((resolve) => ws.once("close", (code, why) => resolve([code, String(why)])));
    ws.on("message", (data) => {
      if (this.light && data.length > 9 && data.toString("latin1", 0, 9) === '["EVENT",') {
        this.unparsedEvents++;
        return;
      }
      const message = JSON.parse(data);
      if (message[0] === "AUTH") {
        this.challenge = message[1];
        this.onChallenge();
      }
      this.waiting = this.waiting.filter((w) => !w.take(message));
    });
    ws.on("error", () => {});
  }

  send(message) {
    this.ws.send(JSON.stringify(message));
  }

  // The first message `take` accepts (it returns true once done), or a rejection after
  // `timeoutMs`.
  until(take, timeoutMs) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting = this.waiting.filter((w) => w !== waiter);
        reject(new Error("no answer"));
      }, timeoutMs);
      const waiter = {
        take: (message) => {
          const done = take(message);
          if (done !== undefined) {
            clearTimeout(timer);
            resolve(done);
            return true;
          }
          return false;
        },
      };
      this.waiting.push(waiter);
    });
  }

  async auth(secretKey) {
    await this.challenged;
    const event = authEvent(this.url, this.challenge, secretKey);
    const answer = this.until((m) => (m[0] === "OK" && m[1] === event.id ? m : undefined), 10_000);
    this.send(["AUTH", event]);
    const [, , ok, text] = await answer;
    if (!ok) throw new Error(`AUTH refused: ${text}`);
  }

  // A REQ's stored answer: { events, end: "EOSE" | the CLOSED text }. The subscription is
  // closed again after EOSE.
  async req(filters, timeoutMs = 10_000) {
    const id = randomUUID().slice(0, 16);
    const events = [];
    const end = this.until((m) => {
      if (m[1] !== id) return undefined;
      if (m[0] === "EVENT") events.push(m[2]);
      if (m[0] === "EOSE") return "EOSE";
      if (m[0] === "CLOSED") return m[2];
      return undefined;
    }, timeoutMs);
    this.send(["REQ", id, ...filters]);
    const how = await end;
    if (how === "EOSE") this.send(["CLOSE", id]);
    return { events, end: how };
  }

  // A NIP-45 COUNT: { count, approximate } or { refused: the CLOSED text }.
  async count(filters, timeoutMs = 10_000) {
    const id = randomUUID().slice(0, 16);
    const answer = this.until((m) => {
      if (m[1] !== id) return undefined;
      if (m[0] === "COUNT") return m[2];
      if (m[0] === "CLOSED") return { refused: m[2] };
      return undefined;
    }, timeoutMs);
    this.send(["COUNT", id, ...filters]);
    return answer;
  }

  // A signed event published: [accepted, text].
  async publish(event, timeoutMs = 30_000) {
    const answer = this.until((m) => (m[0] === "OK" && m[1] === event.id ? [m[2], m[3]] : undefined), timeoutMs);
    this.send(["EVENT", event]);
    return answer;
  }

  // A NIP-77 NEG-OPEN from an empty set: "NEG-MSG" when the relay took it, else the
  // NEG-ERR text. The session stays open (NEG-CLOSE it with `negClose`).
  async negOpen(id, filter, timeoutMs = 30_000) {
    const storage = new NegentropyStorageVector();
    storage.seal();
    const first = new Negentropy(storage, 60_000).initiate();
    const answer = this.until((m) => {
      if (m[1] !== id) return undefined;
      if (m[0] === "NEG-MSG") return "NEG-MSG";
      if (m[0] === "NEG-ERR") return m[2];
      return undefined;
    }, timeoutMs);
    this.send(["NEG-OPEN", id, filter, first]);
    return answer;
  }

  negClose(id) {
    this.send(["NEG-CLOSE", id]);
  }

  close() {
    this.ws.close();
  }
}

export const newKey = () => generateSecretKey();
export const pubkeyOf = (secretKey) => getPublicKey(secretKey);

// `POST /query` with `filters`, signed (NIP-98, with a nonce so parallel identical
// requests are distinct auth events): [status, body text].
export async function postQuery(httpBase, secretKey, filters, timeoutMs = 10_000) {
  const body = JSON.stringify(filters);
  const url = `${httpBase}/query`;
  const auth = finalizeEvent(
    {
      kind: 27235,
      created_at: now(),
      tags: [
        ["u", url],
        ["method", "POST"],
        ["payload", createHash("sha256").update(body).digest("hex")],
        ["nonce", randomUUID()],
      ],
      content: "",
    },
    secretKey,
  );
  const header = `Nostr ${Buffer.from(JSON.stringify(auth)).toString("base64")}`;
  const answer = await fetch(url, {
    method: "POST",
    headers: { authorization: header, "content-type": "application/json" },
    body,
    signal: AbortSignal.timeout(timeoutMs),
  });
  return [answer.status, await answer.text()];
}
