-- moderation.lua — who may write at all. Buzz calls moderate(req) before every write,
-- before access.lua's can_write(req); the first deny wins. Reads never come here.
-- See policies/README.md for req fields and the buzz.* functions.

function moderate(req)
  local actor = req.actor

  -- Banned: no writes of any kind.
  if actor.banned then
    if actor.ban_reason then
      return buzz.deny("blocked", "banned: " .. actor.ban_reason)
    end
    return buzz.deny("blocked", "banned")
  end

  -- Timed out: no writes until the timeout ends, but leaving a channel is still allowed.
  if actor.timeout_until and actor.timeout_until > req.now and req.action ~= "leave" then
    return buzz.deny("restricted", "timed out until " .. actor.timeout_until)
  end

  -- Closed community: only its members and owners write (anonymous: authenticate first).
  if not req.community.open and not actor.community_member and not actor.community_owner then
    if actor.pubkey == nil then
      return buzz.deny("auth-required", "authentication required")
    end
    return buzz.deny("restricted", "not a member of this community")
  end

  return buzz.allow()
end
