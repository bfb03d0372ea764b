-- moderation.lua variant "only admins post in #announcements"
-- (policies/examples/announcements.lua): the default moderation rules, plus one. In a
-- channel named "announcements" only channel owners and admins, and community owners,
-- post messages; everyone who can read it may still react.

local ANNOUNCEMENTS = "announcements"

local function is_admin(actor)
  return actor.community_owner or actor.channel_role == "owner" or actor.channel_role == "admin"
end

-- moderate runs before access.lua: a private channel's name must not answer anyone
-- access.lua would tell "unknown channel", so the rule is only for its members.
local function may_know(req)
  return not req.channel.private or req.actor.channel_role ~= nil or req.actor.community_owner
end

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
  if req.action == "message" and req.channel and req.channel.name == ANNOUNCEMENTS
      and may_know(req) and not is_admin(actor) then
    return buzz.deny("restricted", "only admins post in #announcements")
  end

  return buzz.allow()
end
