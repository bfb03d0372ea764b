-- access.lua variant "guests may only react" (policies/examples/guests_may_react.lua).
-- The default policies/access.lua with one line changed, GUEST_MAY: guests may react to
-- messages, but still not post or edit. Generated, not edited: after a change to
-- access.lua, `BUZZ_REGENERATE_EXAMPLES=1 cargo test -p buzz-policy --test examples`
-- rewrites everything below this header (the same test fails while it differs).

-- One answer for "no such channel" and "not yours to see": an inaccessible channel must be
-- indistinguishable from a nonexistent one.
local UNKNOWN = "unknown channel"

-- New channels one pubkey may create per hour (community owners are exempt).
local CHANNELS_PER_HOUR = 30

-- What a guest (read-only role) may still do in a channel it can read.
local GUEST_MAY = { react = true, delete = true } -- this variant's one change

-- Actions that post or change conversation content.
local POSTING = { message = true, react = true, edit = true, delete = true }

-- What an archived channel no longer takes: new content of any kind (its authors may
-- still delete what they wrote).
local ARCHIVED_REFUSES = { message = true, react = true, edit = true }

-- Actions that manage a channel: channel owners and admins, and community owners.
local MANAGING = {
  edit_channel = true, add_member = true, remove_member = true,
  moderate_remove = true, delete_channel = true,
}

local function community_member(req)
  local actor = req.actor
  return actor.community_owner or actor.community_member
    or (req.community.open and actor.pubkey ~= nil)
end

-- Reading rights: open channel → community members; private → its members (any role)
-- and community owners.
local function can_see(req)
  local channel = req.channel
  if channel == nil or not channel.exists or channel.deleted then
    return false
  end
  if channel.private then
    return req.actor.channel_role ~= nil or req.actor.community_owner
  end
  return community_member(req)
end

local function channel_admin(actor)
  return actor.community_owner or actor.channel_role == "owner" or actor.channel_role == "admin"
end

-- Every p tag names the actor (remove_member used to leave).
local function removes_only_self(req)
  local found = false
  for _, tag in ipairs(req.event.tags) do
    if tag[1] == "p" then
      if tag[2] ~= req.actor.pubkey then
        return false
      end
      found = true
    end
  end
  return found
end

function can_read(req)
  if req.actor.pubkey == nil then
    return buzz.deny("auth-required", "authentication required")
  end
  if req.actor.banned then
    return buzz.deny("restricted", "banned")
  end
  if not can_see(req) then
    return buzz.deny("restricted", UNKNOWN)
  end
  return buzz.allow()
end

function can_write(req)
  local action, actor, channel = req.action, req.actor, req.channel

  -- Writes that are not about a channel (e.g. a profile) are not this rulebook's business.
  if action == "other" and channel == nil then
    return buzz.allow()
  end
  if actor.pubkey == nil then
    return buzz.deny("auth-required", "authentication required")
  end

  if action == "community_admin" then
    if actor.community_owner then
      return buzz.allow()
    end
    return buzz.deny("restricted", "only community owners may do this")
  end

  if action == "create_channel" then
    if not community_member(req) then
      return buzz.deny("restricted", "not a member of this community")
    end
    -- Channels are cheap to make and every member's sidebar lists them: bound how fast
    -- one pubkey can make them (owners are exempt).
    if not actor.community_owner
      and not buzz.rate_limit("create_channel:" .. actor.pubkey, CHANNELS_PER_HOUR, 3600) then
      return buzz.deny("rate-limited", "too many new channels; try again later")
    end
    return buzz.allow()
  end

  if action == "join" then
    if channel == nil or not channel.exists or channel.deleted then
      return buzz.deny("restricted", UNKNOWN)
    end
    if channel.private then
      -- Only those who can already see it learn that it is private; to anyone else it
      -- is as unknown as a channel that does not exist.
      if can_see(req) then
        return buzz.deny("restricted", "channel is private")
      end
      return buzz.deny("restricted", UNKNOWN)
    end
    if not community_member(req) then
      return buzz.deny("restricted", "not a member of this community")
    end
    return buzz.allow()
  end

  if action == "leave" then
    if actor.channel_role ~= nil then
      return buzz.allow()
    end
    return buzz.deny("restricted", "not a member of this channel")
  end

  -- Everything else happens inside a channel the actor can read.
  if not can_see(req) then
    return buzz.deny("restricted", UNKNOWN)
  end

  if POSTING[action] then
    if actor.channel_role == "guest" and not GUEST_MAY[action] then
      return buzz.deny("restricted", "guests are read-only")
    end
    if ARCHIVED_REFUSES[action] and channel.archived then
      return buzz.deny("invalid", "channel is archived")
    end
    return buzz.allow()
  end

  if MANAGING[action] then
    if channel_admin(actor) then
      return buzz.allow()
    end
    if action == "remove_member" and removes_only_self(req) then
      return buzz.allow()
    end
    return buzz.deny("restricted", "only channel owners and admins may do this")
  end

  if action == "other" then
    return buzz.allow()
  end
  return buzz.deny("invalid", "unknown action " .. tostring(action))
end
