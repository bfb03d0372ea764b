-- moderation.lua variant "rate-limit new members"
-- (policies/examples/new_member_rate_limit.lua): the default moderation rules, plus one.
-- Whoever joined a channel less than 24 hours ago may post at most 5 messages a minute
-- there. The counter is shared by all relay processes when Redis is configured.

local DAY = 24 * 60 * 60
local LIMIT, WINDOW = 5, 60

function moderate(req)
  local actor = req.actor

  -- The default rules (policies/moderation.lua).
  if actor.banned then
    if actor.ban_reason then
      return buzz.deny("blocked", "banned: " .. actor.ban_reason)
    end
    return buzz.deny("blocked", "banned")
  end
  if actor.timeout_until and actor.timeout_until > req.now and req.action ~= "leave" then
    return buzz.deny("restricted", "timed out until " .. actor.timeout_until)
  end
  if not req.community.open and not actor.community_member and not actor.community_owner then
    if actor.pubkey == nil then
      return buzz.deny("auth-required", "authentication required")
    end
    return buzz.deny("restricted", "not a member of this community")
  end

  -- The extra rule.
  local joined = actor.channel_joined_at
  if req.action == "message" and req.channel and joined and req.now - joined < DAY then
    local key = "new-member:" .. req.community.host .. ":" .. req.channel.id .. ":" .. actor.pubkey
    if not buzz.rate_limit(key, LIMIT, WINDOW) then
      return buzz.deny("rate-limited", "new members may post 5 messages a minute")
    end
  end

  return buzz.allow()
end
