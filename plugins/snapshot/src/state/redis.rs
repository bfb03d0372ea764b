//! Captures in Redis: one hash holds every capture's records (`<id>|<name>` fields) and
//! the quota index (field `quota`: captures and leases with their community, reader,
//! deadline, charged bytes and pages), so an eviction removes them together. Quota
//! changes and registration are Lua scripts (atomic); reads fetch only the fields they
//! name. Each capture has a fixed logical expiry (in its header and the index); the
//! hash's own expiry is set to the latest of them, so it goes when its last capture
//! goes. Every call has the link's deadline; an outage is `snapshot_unavailable`.

use super::{CaptureInfo, CaptureStore, Lease, Quota, Refusal, SWEEP_STEP};
use crate::error;
use crate::manifest::{names, Header, Manifest};
use buzz_core::error::Reason;
use buzz_core::redis_link::RedisLink;
use std::sync::Arc;

/// Shared Lua: load/save the index (keeping the hash's expiry at the latest deadline)
/// and drop one capture's fields.
const PRELUDE: &str = r#"
local key = KEYS[1]
local raw = redis.call('HGET', key, 'quota')
local q = raw and cjson.decode(raw) or {}
q.c = q.c or {}
q.l = q.l or {}
local function save()
  local latest = 0
  local any = false
  for _, x in pairs(q.c) do any = true; if x[3] > latest then latest = x[3] end end
  for _, x in pairs(q.l) do any = true; if x[3] > latest then latest = x[3] end end
  if not any then
    redis.call('DEL', key)
    return
  end
  redis.call('HSET', key, 'quota', cjson.encode(q))
  redis.call('PEXPIREAT', key, latest)
end
local function drop(id, pages)
  local fields = {id .. '|h', id .. '|r', id .. '|k'}
  for n = 0, pages - 1 do
    local page = redis.call('HGET', key, id .. '|p:' .. n)
    if page then
      for _, e in ipairs(cjson.decode(page)) do
        fields[#fields + 1] = id .. '|b:' .. e.revisionId
      end
    end
    fields[#fields + 1] = id .. '|p:' .. n
    fields[#fields + 1] = id .. '|s:' .. n
  end
  for i = 1, #fields, 500 do
    redis.call('HDEL', key, unpack(fields, i, math.min(i + 499, #fields)))
  end
end
local function sweep(now, step)
  for id, l in pairs(q.l) do
    if l[3] <= now then q.l[id] = nil end
  end
  local swept = 0
  for id, c in pairs(q.c) do
    if c[3] <= now and swept < step then
      drop(id, c[5])
      q.c[id] = nil
      swept = swept + 1
    end
  end
  return swept
end
-- What the communities other than `community` keep unused of their `reserve`.
local function kept(community, reserve, held, communities)
  local sum = 0
  for _, c in ipairs(communities) do
    if c ~= community then
      local left = reserve - (held[c] or 0)
      if left > 0 then sum = sum + left end
    end
  end
  return sum
end
"#;

/// ARGV: id, community, reader, until, now, max captures, per reader, sweep step,
/// reserved captures, the relay's communities (JSON). The reader's bound is named first,
/// then the relay's, then the other communities' reserves (`slot_for`).
const RESERVE: &str = r#"
local now = tonumber(ARGV[5])
sweep(now, tonumber(ARGV[8]))
local community, reader = tonumber(ARGV[2]), ARGV[3]
local max = tonumber(ARGV[6])
local active, mine = 0, 0
local held = {}
for _, t in ipairs({q.c, q.l}) do
  for _, x in pairs(t) do
    if x[3] > now then
      active = active + 1
      held[x[1]] = (held[x[1]] or 0) + 1
      if x[1] == community and x[2] == reader then mine = mine + 1 end
    end
  end
end
local answer = 'ok'
if mine >= tonumber(ARGV[7]) then
  answer = 'reader'
elseif active >= max then
  answer = 'capacity'
elseif active + 1 + kept(community, tonumber(ARGV[9]), held, cjson.decode(ARGV[10])) > max then
  answer = 'community'
else
  q.l[ARGV[1]] = {community, reader, tonumber(ARGV[4])}
end
save()
return answer
"#;

/// ARGV: id, now, expires, bytes, pages, max bytes, community, reader, reserved
/// bytes, the relay's communities (JSON), then field/value pairs (`bytes_for`).
const REGISTER: &str = r#"
local id, now = ARGV[1], tonumber(ARGV[2])
local lease = q.l[id]
if not lease or lease[3] <= now then
  q.l[id] = nil
  save()
  return 'lapsed'
end
local community, bytes = tonumber(ARGV[7]), tonumber(ARGV[4])
local max = tonumber(ARGV[6])
local used = 0
local held = {}
for _, c in pairs(q.c) do
  if c[3] > now then
    used = used + c[4]
    held[c[1]] = (held[c[1]] or 0) + c[4]
  end
end
local refusal = nil
if used + bytes > max then
  refusal = 'bytes'
elseif used + bytes + kept(community, tonumber(ARGV[9]), held, cjson.decode(ARGV[10])) > max then
  refusal = 'community_bytes'
end
if refusal then
  q.l[id] = nil
  save()
  return refusal
end
for i = 11, #ARGV, 1000 do
  redis.call('HSET', key, unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
q.l[id] = nil
q.c[id] = {community, ARGV[8], tonumber(ARGV[3]), bytes, tonumber(ARGV[5])}
save()
return 'ok'
"#;

/// ARGV: id.
const RELEASE: &str = r#"
if q.l[ARGV[1]] then
  q.l[ARGV[1]] = nil
  save()
end
return 'ok'
"#;

/// ARGV: now, step.
const SWEEP: &str = r#"
local swept = sweep(tonumber(ARGV[1]), tonumber(ARGV[2]))
save()
return swept
"#;

/// ARGV: community.
const FORGET: &str = r#"
local community = tonumber(ARGV[1])
local removed = 0
for id, c in pairs(q.c) do
  if c[1] == community then
    drop(id, c[5])
    q.c[id] = nil
    removed = removed + 1
  end
end
for id, l in pairs(q.l) do
  if l[1] == community then q.l[id] = nil end
end
save()
return removed
"#;

/// ARGV: id, page. Only while the capture's header is there (never recreates a hash).
const MARK_SERVED: &str = r#"
if redis.call('HEXISTS', KEYS[1], ARGV[1] .. '|h') == 1 then
  redis.call('HSET', KEYS[1], ARGV[1] .. '|s:' .. ARGV[2], '1')
  return 1
end
return 0
"#;

pub(crate) struct RedisCaptures {
    link: Arc<RedisLink>,
    key: String,
}

impl RedisCaptures {
    pub(crate) fn new(link: Arc<RedisLink>, prefix: &str) -> RedisCaptures {
        RedisCaptures {
            link,
            key: format!("{prefix}:snapshot"),
        }
    }

    fn script(&self, body: &str, with_prelude: bool) -> redis::Cmd {
        let mut cmd = redis::cmd("EVAL");
        if with_prelude {
            cmd.arg(format!("{PRELUDE}\n{body}"));
        } else {
            cmd.arg(body);
        }
        cmd.arg(1).arg(&self.key);
        cmd
    }

    async fn run<T: redis::FromRedisValue>(
        &self,
        what: &str,
        cmd: &redis::Cmd,
    ) -> Result<T, Reason> {
        self.link.run(what, cmd).await.map_err(error::contract)
    }
}

/// The relay's communities as the scripts read them (a JSON array).
fn communities(quota: &Quota) -> Result<String, Reason> {
    serde_json::to_string(&*quota.communities).map_err(|e| Reason::Internal(e.into()))
}

fn refusal(answer: &str) -> Result<Result<(), Refusal>, Reason> {
    Ok(match answer {
        "ok" => Ok(()),
        "capacity" => Err(Refusal::Capacity),
        "community" => Err(Refusal::Community),
        "reader" => Err(Refusal::Reader),
        "bytes" => Err(Refusal::Bytes),
        "community_bytes" => Err(Refusal::CommunityBytes),
        "lapsed" => Err(Refusal::Lapsed),
        other => {
            return Err(Reason::Internal(anyhow::anyhow!(
                "snapshot script answered {other:?}"
            )))
        }
    })
}

#[async_trait::async_trait]
impl CaptureStore for RedisCaptures {
    async fn reserve(
        &self,
        lease: &Lease,
        quota: Quota,
        now_ms: i64,
    ) -> Result<Result<(), Refusal>, Reason> {
        let mut cmd = self.script(RESERVE, true);
        cmd.arg(&lease.id)
            .arg(lease.community)
            .arg(&lease.reader)
            .arg(lease.until_ms)
            .arg(now_ms)
            .arg(quota.max_captures)
            .arg(quota.per_reader)
            .arg(SWEEP_STEP)
            .arg(quota.reserved_captures)
            .arg(communities(&quota)?);
        let answer: String = self.run("reserving a snapshot capture", &cmd).await?;
        refusal(&answer)
    }

    async fn register(
        &self,
        manifest: &Manifest,
        quota: Quota,
        now_ms: i64,
    ) -> Result<Result<(), Refusal>, Reason> {
        let h = &manifest.header;
        let mut cmd = self.script(REGISTER, true);
        cmd.arg(&h.id)
            .arg(now_ms)
            .arg(h.expires_ms)
            .arg(h.bytes)
            .arg(h.pages)
            .arg(quota.max_charged_bytes)
            .arg(h.community)
            .arg(&h.reader)
            .arg(quota.reserved_bytes)
            .arg(communities(&quota)?);
        for (name, value) in &manifest.records {
            cmd.arg(format!("{}|{name}", h.id)).arg(value);
        }
        cmd.arg(format!("{}|{}", h.id, names::served(0))).arg("1");
        let answer: String = self.run("registering a snapshot capture", &cmd).await?;
        refusal(&answer)
    }

    async fn release(&self, id: &str) {
        let mut cmd = self.script(RELEASE, true);
        cmd.arg(id);
        if let Err(reason) = self.run::<String>("releasing a snapshot lease", &cmd).await {
            tracing::warn!(%reason, "snapshot lease not released; it expires by itself");
        }
    }

    async fn records(&self, id: &str, names: &[String]) -> Result<Vec<Option<String>>, Reason> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(&self.key);
        for name in names {
            cmd.arg(format!("{id}|{name}"));
        }
        self.run("reading a snapshot capture", &cmd).await
    }

    async fn mark_served(&self, id: &str, page: u32) -> Result<bool, Reason> {
        let mut cmd = self.script(MARK_SERVED, false);
        cmd.arg(id).arg(page);
        let marked: i64 = self.run("recording a served snapshot page", &cmd).await?;
        Ok(marked == 1)
    }

    async fn sweep(&self, now_ms: i64, step: usize) -> Result<usize, Reason> {
        let mut cmd = self.script(SWEEP, true);
        cmd.arg(now_ms).arg(step);
        let swept: i64 = self.run("removing expired snapshot captures", &cmd).await?;
        Ok(usize::try_from(swept).unwrap_or(0))
    }

    async fn forget_community(&self, community: i64) -> Result<usize, Reason> {
        let mut cmd = self.script(FORGET, true);
        cmd.arg(community);
        let removed: i64 = self
            .run("removing a community's snapshot captures", &cmd)
            .await?;
        Ok(usize::try_from(removed).unwrap_or(0))
    }

    async fn list(&self) -> Result<Vec<CaptureInfo>, Reason> {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(&self.key).arg("quota");
        let raw: Option<String> = self.run("reading the snapshot quota", &cmd).await?;
        let index: serde_json::Value = match raw {
            Some(text) => serde_json::from_str(&text).map_err(|e| Reason::Internal(e.into()))?,
            None => return Ok(Vec::new()),
        };
        let mut out = Vec::new();
        let slot = |v: &serde_json::Value, i: usize| v.get(i).cloned().unwrap_or_default();
        if let Some(leases) = index.get("l").and_then(|l| l.as_object()) {
            for (id, l) in leases {
                out.push(CaptureInfo {
                    id: id.clone(),
                    community: slot(l, 0).as_i64().unwrap_or_default(),
                    reader: slot(l, 1).as_str().unwrap_or_default().to_owned(),
                    registered: false,
                    query: String::new(),
                    created_ms: 0,
                    until_ms: slot(l, 2).as_i64().unwrap_or_default(),
                    entries: 0,
                    pages: 0,
                    pages_served: 0,
                    bytes: 0,
                });
            }
        }
        if let Some(captures) = index.get("c").and_then(|c| c.as_object()) {
            for id in captures.keys() {
                let Some(Some(text)) = self.records(id, &[names::HEADER.into()]).await?.pop()
                else {
                    continue;
                };
                let h: Header =
                    serde_json::from_str(&text).map_err(|e| Reason::Internal(e.into()))?;
                let marks: Vec<String> = (0..h.pages).map(names::served).collect();
                let served = self.records(id, &marks).await?.iter().flatten().count();
                out.push(info(h, served));
            }
        }
        Ok(out)
    }
}

pub(crate) fn info(h: Header, served: usize) -> CaptureInfo {
    CaptureInfo {
        id: h.id,
        community: h.community,
        reader: h.reader,
        registered: true,
        query: h.query,
        created_ms: h.created_ms,
        until_ms: h.expires_ms,
        entries: h.entries,
        pages: h.pages,
        pages_served: u32::try_from(served).unwrap_or(u32::MAX),
        bytes: h.bytes,
    }
}
