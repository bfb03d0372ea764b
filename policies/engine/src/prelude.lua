-- Trusted setup, run once per Lua state with the real globals, before any policy script.
-- It builds the allow-listed globals every script starts from and the Lua halves of the
-- `buzz` host table. Errors raised here with level 2 point at the policy script's line.

local setmetatable, getmetatable, rawget, error, type, next, tostring, ipairs =
  setmetatable, getmetatable, rawget, error, type, next, tostring, ipairs

local function read_only_error(_, key)
  error("attempt to modify read-only field '" .. tostring(key) .. "'", 2)
end

local function frozen_global_error(_, key)
  error("attempt to assign to global '" .. tostring(key) .. "': globals are frozen after load (use a local)", 2)
end

-- A read-only view of `backing`: reads, #, pairs and ipairs work, writes raise an error and
-- the metatable cannot be fetched or replaced. `pairs` hands out an iterator that closes
-- over `backing` instead of `next, backing`: the backing table itself must never reach a
-- script, or it could be written through.
local function readonly(backing)
  local function iterate(_, key)
    return next(backing, key)
  end
  return setmetatable({}, {
    __index = backing,
    __newindex = read_only_error,
    __len = function() return #backing end,
    __pairs = function(view) return iterate, view, nil end,
    __metatable = false,
  })
end

-- All strings share one metatable; keep scripts from reaching (and changing) it.
getmetatable("").__metatable = false

-- Whether the current run was stopped (budget or deadline); set by the host.
local run_stopped

-- `__close` handlers need care. When the deadline error is raised from the instruction hook,
-- the host library unwinds the running function's stack while still inside the hook, where
-- hooks are off: a to-be-closed variable's `__close` would run unmetered and could loop for
-- ever. So `setmetatable` installs a private snapshot of the script's metatable (its `__`
-- fields), whose `__close` does nothing once the run is stopped. Being private, the snapshot
-- cannot be changed afterwards (a `__close` added to the script's table later has no
-- effect); `getmetatable` still returns the script's own table.
local originals = setmetatable({}, { __mode = "k" }) -- snapshot -> the script's metatable

local function guarded_close(close)
  return function(value, err)
    if run_stopped() then
      return
    end
    return close(value, err)
  end
end

local string_sub = string.sub

local function snapshot(mt)
  local copy = {}
  for key, value in next, mt do
    if type(key) == "string" and string_sub(key, 1, 2) == "__" then
      copy[key] = value
    end
  end
  if copy.__close ~= nil then
    copy.__close = guarded_close(copy.__close)
  end
  originals[copy] = mt
  return copy
end

-- Finalizers run inside the garbage collector where the instruction hook cannot stop them.
local function safe_setmetatable(t, mt)
  if type(mt) == "table" then
    if rawget(mt, "__gc") ~= nil then
      error("__gc metamethods are not allowed in policy scripts", 2)
    end
    mt = snapshot(mt)
  end
  return setmetatable(t, mt)
end

local function safe_getmetatable(value)
  local mt = getmetatable(value)
  if mt == nil then
    return nil
  end
  return originals[mt] or mt
end

-- xpcall without a message handler inside the error: Lua runs a message handler while the
-- failing instruction hook is still active, i.e. with hooks disabled, so a looping handler
-- would escape the deadline. Here the handler runs after the stack unwound, under the hook.
local pcall, table_pack, table_unpack = pcall, table.pack, table.unpack
local function safe_xpcall(f, handler, ...)
  local results = table_pack(pcall(f, ...))
  if results[1] then
    return table_unpack(results, 1, results.n)
  end
  return false, handler(results[2])
end

local base = {}
for _, name in ipairs({
  "assert", "error", "getmetatable", "ipairs", "next", "pairs", "pcall", "rawequal",
  "rawget", "rawlen", "select", "tonumber", "tostring", "type", "_VERSION",
}) do
  base[name] = _G[name]
end
base.setmetatable = safe_setmetatable
base.getmetatable = safe_getmetatable
base.xpcall = safe_xpcall

-- table.sort without a comparator compares in C, unmetered: n log n steps for one
-- instruction. With a Lua comparator every comparison runs under the instruction hook.
local table_sort = table.sort
local function less_than(a, b)
  return a < b
end
local sandbox_table = {}
for name, f in next, table do
  sandbox_table[name] = f
end
sandbox_table.sort = function(t, comp)
  return table_sort(t, comp or less_than)
end
base.string = readonly(string)
base.table = readonly(sandbox_table)
base.math = readonly(math)
base.utf8 = readonly(utf8)

local DENY_KINDS = {
  invalid = true, restricted = true, blocked = true,
  ["rate-limited"] = true, ["auth-required"] = true,
}

local ALLOW = readonly({ allow = true })

local function allow()
  return ALLOW
end

local function deny(kind, message)
  if not DENY_KINDS[kind] then
    error("buzz.deny: unknown kind " .. tostring(kind)
      .. " (expected invalid, restricted, blocked, rate-limited or auth-required)", 2)
  end
  if message ~= nil and type(message) ~= "string" then
    error("buzz.deny: message must be a string, got " .. type(message), 2)
  end
  return { deny = kind, message = message or "denied by policy" }
end

-- Does the event carry a tag `name` (with first value `value`, when given)?
local function has_tag(event, name, value)
  for _, tag in ipairs(event.tags) do
    if tag[1] == name and (value == nil or tag[2] == value) then
      return true
    end
  end
  return false
end

-- First value of the event's first tag `name`, or nil.
local function tag(event, name)
  for _, t in ipairs(event.tags) do
    if t[1] == name then
      return t[2]
    end
  end
  return nil
end

-- The `buzz` table of one script; `log`, `now` and `rate_limit` are host functions.
local function make_buzz(log, now, rate_limit)
  return readonly({
    log = log,
    allow = allow,
    deny = deny,
    rate_limit = rate_limit,
    now = now,
    has_tag = has_tag,
    tag = tag,
  })
end

-- Read-only request tables. `#` and `pairs` go through host functions that find the
-- backing table (set once by the host with set_host_functions). Every table inside a view
-- is a view too, so `pairs` never yields anything writable.
local view_len, view_pairs
local function set_host_functions(len, pairs_fn, stopped)
  view_len, view_pairs, run_stopped = len, pairs_fn, stopped
end

local function view(data)
  return setmetatable({}, {
    __index = data,
    __newindex = read_only_error,
    __len = view_len,
    __pairs = view_pairs,
    __metatable = false,
  })
end

local string_gmatch, math_tointeger = string.gmatch, math.tointeger

-- `shape` lists each tag's length ("2,4"); the tag values follow as varargs.
local function make_tags(shape, ...)
  local values = table_pack(...)
  local tags, n, i = {}, 0, 1
  for len in string_gmatch(shape, "%d+") do
    local tag = {}
    for j = 1, math_tointeger(len) do
      tag[j] = values[i]
      i = i + 1
    end
    n = n + 1
    tags[n] = view(tag)
  end
  return view(tags)
end

local function make_actor(pubkey, owner, member, role, joined, banned, reason, timeout)
  return view({
    pubkey = pubkey, community_owner = owner, community_member = member,
    channel_role = role, channel_joined_at = joined, banned = banned,
    ban_reason = reason, timeout_until = timeout,
  })
end

local function make_channel(id, exists, name, private, archived, channel_type, deleted)
  return view({
    id = id, exists = exists, name = name, private = private, archived = archived,
    channel_type = channel_type, deleted = deleted,
  })
end

local function make_community(host, open)
  return view({ host = host, open = open })
end

-- The `req` of moderate/can_write: the event from positional facts (one host call per
-- request), the actor, channel (or nil) and community as views the host made with the
-- functions above. Views are read-only, so the host may hand the same one to many
-- requests. The event's tags are built the first time a script reads them:
-- `tags_of()` (valid during this request only) answers their shape and values.
local function make_write_req(action, now,
    ev_id, ev_pubkey, ev_kind, ev_created_at, ev_content,
    actor, channel, community, tags_of)
  local event = setmetatable({
    id = ev_id, pubkey = ev_pubkey, kind = ev_kind, created_at = ev_created_at,
    content = ev_content,
  }, {
    __index = function(fields, key)
      if key ~= "tags" then
        return nil
      end
      local tags = make_tags(tags_of())
      rawset(fields, "tags", tags)
      return tags
    end,
  })
  return view({
    action = action,
    now = now,
    event = view(event),
    actor = actor,
    channel = channel,
    community = community,
  })
end

-- The `req` of can_read.
local function make_read_req(now, actor, channel, community)
  return view({
    action = "read",
    now = now,
    actor = actor,
    channel = channel,
    community = community,
  })
end

return {
  allow = ALLOW,
  make_write_req = make_write_req,
  make_read_req = make_read_req,
  make_actor = make_actor,
  make_channel = make_channel,
  make_community = make_community,
  set_host_functions = set_host_functions,
  base = base,
  make_buzz = make_buzz,
  frozen_global_error = frozen_global_error,
}
