// NDK 3 against a Buzz relay: NDKSimpleGroup (create, metadata, join, leave) with the
// signIn auth policy, as an NDK application sets it up.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import NDK, { NDKEvent, NDKPrivateKeySigner, NDKRelayAuthPolicies, NDKRelaySet, NDKSimpleGroup } from '@nostr-dev-kit/ndk'
import { RELAY, WebSocket, channelId, within, relayInfo } from '../lib.mjs'

globalThis.WebSocket ??= WebSocket

/** A connected NDK whose relay has answered the AUTH challenge. */
async function connected (signer) {
  const ndk = new NDK({ explicitRelayUrls: [RELAY], signer })
  ndk.relayAuthDefaultPolicy = NDKRelayAuthPolicies.signIn({ ndk })
  const authed = new Promise((resolve) => ndk.pool.on('relay:authed', resolve))
  await ndk.connect(3000)
  await within(5000, 'NDK AUTH', authed)
  return ndk
}

let alice, bob, aliceNdk, bobNdk
before(async () => {
  alice = NDKPrivateKeySigner.generate()
  bob = NDKPrivateKeySigner.generate()
  aliceNdk = await connected(alice)
  bobNdk = await connected(bob)
})

after(() => {
  for (const ndk of [aliceNdk, bobNdk]) {
    for (const relay of ndk.pool.relays.values()) relay.disconnect()
  }
})

const relaySet = (ndk) => NDKRelaySet.fromRelayUrls([RELAY], ndk)

test('createGroup (a 9007 with only h) and setMetadata', async () => {
  const id = channelId()
  const group = new NDKSimpleGroup(aliceNdk, relaySet(aliceNdk), id)
  const published = await within(5000, 'createGroup', group.createGroup())
  assert.ok(published.size > 0, 'the 9007 was accepted')
  await within(5000, 'setMetadata', group.setMetadata({ name: 'Pizza', about: 'NDK made me' }))
  const fresh = new NDKSimpleGroup(aliceNdk, relaySet(aliceNdk), id)
  const metadata = await within(5000, 'getMetadata', fresh.getMetadata())
  assert.equal(metadata.name, 'Pizza')
  const info = await relayInfo()
  assert.equal(metadata.pubkey, info.pubkey, 'signed by the NIP-11 pubkey')
})

test('NDK\'s default group id is refused, saying the relay takes lowercase UUIDs', async () => {
  const group = new NDKSimpleGroup(aliceNdk, relaySet(aliceNdk))
  await assert.rejects(within(5000, 'createGroup', group.createGroup()), (err) => {
    const text = [err.message, ...[...(err.errors?.values?.() ?? [])].map((e) => e.message)].join(' ')
    assert.match(text, /lowercase UUID/, text)
    assert.match(text, /8-4-4-4-12/, text)
    return true
  })
})

test('requestToJoin, again (duplicate:), then leave: members and the relay 9001', async () => {
  const id = channelId()
  const group = new NDKSimpleGroup(aliceNdk, relaySet(aliceNdk), id)
  await within(5000, 'createGroup', group.createGroup())
  const asBob = new NDKSimpleGroup(bobNdk, relaySet(bobNdk), id)
  await within(5000, 'requestToJoin', asBob.requestToJoin(bob.pubkey))
  await assert.rejects(within(5000, 'requestToJoin again', asBob.requestToJoin(bob.pubkey, 'again')), (err) => {
    const text = [err.message, ...[...(err.errors?.values?.() ?? [])].map((e) => e.message)].join(' ')
    assert.match(text, /duplicate: /, text)
    return true
  })
  const members = await within(5000, 'getMembers', group.getMembers())
  assert.ok(members.some((m) => m.pubkey === bob.pubkey), 'bob is a member')
  const leave = new NDKEvent(bobNdk, { kind: 9022, content: '', tags: [['h', id]] })
  await within(5000, 'leave', leave.publish(relaySet(bobNdk)))
  const removals = await within(5000, 'fetch 9001', aliceNdk.fetchEvents({ kinds: [9001], '#h': [id] }, { closeOnEose: true }, relaySet(aliceNdk)))
  const info = await relayInfo()
  assert.equal(removals.size, 1)
  assert.equal([...removals][0].pubkey, info.pubkey)
})
