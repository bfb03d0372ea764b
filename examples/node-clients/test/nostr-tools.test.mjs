// nostr-tools 2 `SimplePool`, used as its README shows, against a Buzz relay: a client
// that authenticates only when a relay asks (`onauth`), the nip29 helpers, COUNT,
// NegentropySync and NIP-40.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { SimplePool, useWebSocketImplementation } from 'nostr-tools/pool'
import { generateSecretKey, getPublicKey, finalizeEvent } from 'nostr-tools/pure'
import * as nip29 from 'nostr-tools/nip29'
import { RELAY, WebSocket, channelId, within, relayInfo } from '../lib.mjs'

useWebSocketImplementation(WebSocket)

const alice = generateSecretKey()
const bob = generateSecretKey()
const signer = (sk) => (template) => finalizeEvent(template, sk)
const sign = (sk, template) => finalizeEvent({ created_at: Math.floor(Date.now() / 1000), content: '', tags: [], ...template }, sk)
const url = RELAY
let pool, bobPool
const group = channelId()

/** Publish on `p` as `sk`, authenticating when the relay asks; the OK's message. */
async function publish (p, sk, template) {
  const [result] = p.publish([url], sign(sk, template), { onauth: signer(sk) })
  return within(5000, `publish kind ${template.kind}`, result)
}

before(async () => {
  pool = new SimplePool()
  bobPool = new SimplePool()
  // Alice creates the group as nip29.generateCreateGroupEventTemplate makes it: h only.
  const template = nip29.generateCreateGroupEventTemplate(group)
  assert.deepEqual(template.tags, [['h', group]])
  await publish(pool, alice, template)
  await publish(pool, alice, { kind: 9, content: 'hello', tags: [['h', group]] })
})

after(() => {
  pool.destroy()
  bobPool.destroy()
})

test('a lazily authenticating client lists the groups (CLOSED auth-required, then AUTH)', async () => {
  const fresh = new SimplePool()
  try {
    const groups = await within(5000, 'querySync 39000', fresh.querySync([url], { kinds: [39000] }, { onauth: signer(bob) }))
    assert.ok(groups.some((e) => e.tags.some(([t, v]) => t === 'd' && v === group)), `group listed: ${JSON.stringify(groups)}`)
    const messages = await fresh.querySync([url], { kinds: [9], '#h': [group] }, { onauth: signer(bob) })
    assert.equal(messages.length, 1)
  } finally {
    fresh.destroy()
  }
})

test('nip29.loadGroup finds the group by the NIP-11 pubkey', async () => {
  const info = await relayInfo()
  assert.equal(info.pubkey, info.self, 'NIP-11 pubkey is the key that signs group state')
  // loadGroup sends no onauth: authenticate this pool's connection first.
  const relay = await pool.ensureRelay(url)
  await relay.auth(signer(alice))
  const loaded = await within(5000, 'loadGroup', nip29.loadGroup({ pool, groupReference: { host: url, id: group } }))
  assert.equal(loaded.metadata.id, group)
  assert.equal(loaded.metadata.name, undefined, 'unnamed until a 9002')
  assert.ok(loaded.members.some((m) => m.pubkey === getPublicKey(alice)))
})

test('join, a second join is duplicate:, leave brings the relay 9001', async () => {
  const join = nip29.generateGroupJoinRequestEventTemplate(group)
  await publish(bobPool, bob, join)
  await assert.rejects(publish(bobPool, bob, { ...join, content: 'again' }), (err) => {
    assert.match(String(err.message ?? err), /^duplicate: /)
    return true
  })
  await publish(bobPool, bob, nip29.generateGroupLeaveRequestEventTemplate(group))
  const info = await relayInfo()
  const removals = await pool.querySync([url], { kinds: [9001], '#h': [group], '#p': [getPublicKey(bob)] })
  assert.equal(removals.length, 1, JSON.stringify(removals))
  assert.equal(removals[0].pubkey, info.pubkey)
})

test('a non-UUID group id is refused in words that say what to send', async () => {
  await assert.rejects(publish(pool, alice, nip29.generateCreateGroupEventTemplate('pizza')), (err) => {
    const text = String(err.message ?? err)
    assert.match(text, /^invalid: /)
    assert.match(text, /lowercase UUID/)
    assert.match(text, /8-4-4-4-12/, text)
    return true
  })
})

test('COUNT (NIP-45) counts what the reader may read', async () => {
  const relay = await pool.ensureRelay(url)
  const count = await within(5000, 'COUNT', relay.count([{ kinds: [9], '#h': [group] }], {}))
  assert.equal(count, 1)
})

test('NegentropySync ends at once with the relay refusal (NIP-77)', async () => {
  // nostr-tools ships nip77 without a package export entry: load the file itself.
  const { NegentropySync, NegentropyStorageVector } = await import(
    new URL('../node_modules/nostr-tools/lib/esm/nip77.js', import.meta.url)
  )
  const relay = await pool.ensureRelay(url)
  const storage = new NegentropyStorageVector()
  storage.seal()
  const closed = new Promise((resolve) => {
    const sync = new NegentropySync(relay, storage, { kinds: [1] }, { onclose: resolve })
    sync.start()
  })
  await within(3000, 'NEG-OPEN', closed)
})

test('an expired event is refused (NIP-40)', async () => {
  const past = String(Math.floor(Date.now() / 1000) - 60)
  await assert.rejects(publish(pool, alice, { kind: 1, content: 'old', tags: [['expiration', past]] }), /invalid: /)
})
