//! The snapshot plugin's captures (NIP-AR stable manifest transport): every active
//! capture and lease, and the shared quota in use — from Redis when the relay keeps
//! them there, else from its database. Plain data for the Captures pane.

use buzz_core::config::Settings;
use buzz_core::store::Conn;
use buzz_snapshot::{captures_in_database, CaptureInfo, Captures, Limits, NAME};

/// What the Captures pane draws.
#[derive(Debug, Clone, Default)]
pub struct CapturesView {
    /// `Redis` or `database`.
    pub store: &'static str,
    pub list: Vec<CaptureInfo>,
    /// The shared quota: captures alive at once, bytes charged at once.
    pub max_captures: usize,
    pub max_bytes: usize,
}

impl CapturesView {
    /// Captures and leases alive at `now_ms`, and the bytes they are charged.
    pub fn in_use(&self, now_ms: i64) -> (usize, u64) {
        let alive = self.list.iter().filter(|c| c.until_ms > now_ms);
        alive.fold((0, 0), |(n, bytes), c| (n + 1, bytes + c.bytes))
    }
}

/// The limits in force (`[plugins.snapshot]`, defaults filled in).
fn limits(settings: &Settings) -> Limits {
    settings
        .plugins
        .get(NAME)
        .and_then(|section| {
            serde_json::from_value(serde_json::Value::Object(section.options.clone())).ok()
        })
        .unwrap_or_default()
}

fn view(settings: &Settings, store: &'static str, list: Vec<CaptureInfo>) -> CapturesView {
    let limits = limits(settings);
    CapturesView {
        store,
        list,
        max_captures: limits.max_captures,
        max_bytes: limits.max_charged_bytes,
    }
}

/// Does the relay keep its captures in Redis?
pub fn in_redis(settings: &Settings) -> bool {
    !settings.storage.redis_url.is_empty()
}

/// The captures in the relay's database (`conn`).
pub fn from_database(
    settings: &Settings,
    conn: &mut Conn<'_>,
) -> Result<CapturesView, buzz_core::error::Reason> {
    Ok(view(settings, "database", captures_in_database(conn)?))
}

/// The captures in the relay's Redis.
pub async fn from_redis(settings: &Settings) -> Result<CapturesView, String> {
    let captures = match Captures::in_redis(settings).await {
        Some(Ok(captures)) => captures,
        Some(Err(e)) => return Err(format!("Redis: {e:#}")),
        None => return Err("no Redis configured".into()),
    };
    let list = captures.list().await.map_err(|r| format!("Redis: {r}"))?;
    Ok(view(settings, "Redis", list))
}
