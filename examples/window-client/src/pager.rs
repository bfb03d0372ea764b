//! Paging a whole channel or a whole thread, one validated page at a time.
//!
//! The loop follows NIP-CW's client rules: start at the head, continue with the bounds'
//! `next_cursor` echoed verbatim as `until` + `before_id`, stop only when the bounds say
//! `has_more: false` — never on row count.

use crate::binding::ThreadRequest;
use crate::checks::{self, Bounds, Cursor, AUX_KINDS, SUMMARY_KIND};
use crate::transport::{nip11, Transport, Wire};
use anyhow::{anyhow, bail, ensure, Context};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};

/// Conversation kinds a thread page asks for (sorted, as the binding needs them).
pub const THREAD_KINDS: [u32; 4] = [9, 40_002, 45_001, 45_003];
/// Row kinds a channel page asks for.
pub const CHANNEL_KINDS: [u32; 1] = [9];
/// The deepest replies a thread page asks for.
pub const THREAD_DEPTH: u64 = 100;

/// One validated channel-window page.
#[derive(Debug, Clone)]
pub struct ChannelPage {
    pub rows: Vec<Event>,
    pub aux: Vec<Event>,
    pub summaries: Vec<Event>,
    pub bounds: Bounds,
}

/// One validated thread-window page.
#[derive(Debug, Clone)]
pub struct ThreadPage {
    pub rows: Vec<Event>,
    pub aux: Vec<Event>,
    pub bounds: Bounds,
}

/// A client of one relay, authenticated as one key, on one transport.
pub struct WindowClient {
    wire: Wire,
    keys: Keys,
    /// NIP-11 `self`: the only key allowed to sign overlays.
    relay: String,
    /// Normalized authority the relay binds thread windows to.
    authority: String,
}

fn with_cursor(mut filter: Value, cursor: Option<&Cursor>) -> Value {
    if let Some(c) = cursor {
        filter["until"] = json!(c.created_at);
        filter["before_id"] = json!(c.id);
    }
    filter
}

/// Split a page into rows (the requested kinds), aux, summaries and the rest; reject
/// events a window never carries, and verify every event.
fn partition(
    events: &[Event],
    row_kinds: &[u32],
    overlay_kind: u32,
) -> anyhow::Result<(Vec<Event>, Vec<Event>, Vec<Event>)> {
    let (mut rows, mut aux, mut summaries) = (Vec::new(), Vec::new(), Vec::new());
    for event in events {
        if event.kind == overlay_kind {
            continue; // checked separately
        }
        checks::verify_event(event)?;
        if row_kinds.contains(&event.kind) {
            rows.push(event.clone());
        } else if AUX_KINDS.contains(&event.kind) {
            aux.push(event.clone());
        } else if event.kind == SUMMARY_KIND {
            summaries.push(event.clone());
        } else {
            bail!("unexpected kind {} in a window page", event.kind);
        }
    }
    Ok((rows, aux, summaries))
}

/// The next request must move strictly forward, or paging would never end.
fn advances(next: &Cursor, previous: Option<&Cursor>) -> anyhow::Result<()> {
    if let Some(p) = previous {
        ensure!(
            next.created_at < p.created_at || (next.created_at == p.created_at && next.id > p.id),
            "next_cursor does not advance past the request cursor"
        );
    }
    Ok(())
}

impl WindowClient {
    /// `url`: `http(s)://host[:port]`. Reads NIP-11 for the relay key, then opens the
    /// transport (WebSocket: connect and NIP-42 AUTH).
    pub async fn connect(
        url: &str,
        keys: Keys,
        transport: Transport,
    ) -> anyhow::Result<WindowClient> {
        let base = url.trim_end_matches('/');
        let (scheme, host) = base
            .split_once("://")
            .ok_or_else(|| anyhow!("relay url must be http(s)://host[:port], got {url}"))?;
        ensure!(
            !host.is_empty() && !host.contains('/'),
            "relay url must not carry a path: {url}"
        );
        let info = nip11(base).await?;
        let relay = info["self"]
            .as_str()
            .filter(|s| s.len() == 64)
            .ok_or_else(|| anyhow!("NIP-11 has no relay key (self)"))?
            .to_owned();
        Ok(WindowClient {
            wire: Wire::open(base, &keys, transport).await?,
            authority: buzz_nostr::host::authority(host, scheme),
            keys,
            relay,
        })
    }

    /// The relay key every overlay must be signed with.
    pub fn relay_pubkey(&self) -> &str {
        &self.relay
    }

    /// One channel page after `cursor` (`None`: the head), with aux and summaries.
    pub async fn channel_page(
        &mut self,
        channel: &str,
        limit: u64,
        cursor: Option<&Cursor>,
    ) -> anyhow::Result<ChannelPage> {
        let filter = with_cursor(
            json!({"top_level": true, "#h": [channel], "kinds": CHANNEL_KINDS, "limit": limit,
                "include_aux": true, "include_summaries": true}),
            cursor,
        );
        let events = self.wire.query(&[filter]).await?;
        let bounds = checks::channel_bounds(&events, &self.relay, channel, cursor)?;
        let (rows, aux, summaries) =
            partition(&events, &CHANNEL_KINDS, checks::CHANNEL_BOUNDS_KIND)?;
        ensure!(rows.len() as u64 <= limit, "more rows than the limit");
        checks::newest_first_after(&rows, cursor)?;
        for s in &summaries {
            checks::summary(s, &self.relay, channel)?;
            ensure!(
                rows.iter().any(|r| r.id == s.tags[0][1]),
                "a summary for an event that is not a row of this page"
            );
        }
        Ok(ChannelPage {
            rows,
            aux,
            summaries,
            bounds,
        })
    }

    /// One thread page after `cursor` (`None`: the newest replies), with aux.
    pub async fn thread_page(
        &mut self,
        channel: &str,
        root: &str,
        limit: u64,
        cursor: Option<&Cursor>,
    ) -> anyhow::Result<ThreadPage> {
        let filter = with_cursor(
            json!({"thread_window": true, "#h": [channel], "#e": [root], "kinds": THREAD_KINDS,
                "limit": limit, "depth_limit": THREAD_DEPTH, "include_aux": true}),
            cursor,
        );
        let events = self.wire.query(&[filter]).await?;
        let binding = ThreadRequest {
            host: &self.authority,
            reader: self.keys.pubkey(),
            channel,
            root,
            limit,
            depth_limit: THREAD_DEPTH,
            kinds: &THREAD_KINDS,
            cursor,
            include_aux: true,
        }
        .binding_d();
        let bounds = checks::thread_bounds(&events, &self.relay, channel, root, &binding)?;
        let (rows, aux, summaries) = partition(&events, &THREAD_KINDS, checks::THREAD_BOUNDS_KIND)?;
        ensure!(summaries.is_empty(), "thread pages carry no summaries");
        ensure!(rows.len() as u64 <= limit, "more rows than the limit");
        checks::newest_first_after(&rows, cursor)?;
        Ok(ThreadPage { rows, aux, bounds })
    }

    /// Page a whole channel; `each` sees every validated page. Returns all rows.
    pub async fn page_channel(
        &mut self,
        channel: &str,
        limit: u64,
        mut each: impl FnMut(usize, &ChannelPage),
    ) -> anyhow::Result<Vec<Event>> {
        let mut cursor: Option<Cursor> = None;
        let mut rows = Vec::new();
        for number in 1.. {
            let page = self
                .channel_page(channel, limit, cursor.as_ref())
                .await
                .with_context(|| format!("channel page {number} discarded"))?;
            each(number, &page);
            rows.extend(page.rows.iter().cloned());
            match page.bounds.next_cursor {
                None => break,
                Some(next) => {
                    advances(&next, cursor.as_ref())?;
                    cursor = Some(next);
                }
            }
        }
        Ok(rows)
    }

    /// Page a whole thread, newest replies first; `each` sees every validated page.
    pub async fn page_thread(
        &mut self,
        channel: &str,
        root: &str,
        limit: u64,
        mut each: impl FnMut(usize, &ThreadPage),
    ) -> anyhow::Result<Vec<Event>> {
        let mut cursor: Option<Cursor> = None;
        let mut rows = Vec::new();
        for number in 1.. {
            let page = self
                .thread_page(channel, root, limit, cursor.as_ref())
                .await
                .with_context(|| format!("thread page {number} discarded"))?;
            each(number, &page);
            rows.extend(page.rows.iter().cloned());
            match page.bounds.next_cursor {
                None => break,
                Some(next) => {
                    advances(&next, cursor.as_ref())?;
                    cursor = Some(next);
                }
            }
        }
        Ok(rows)
    }
}
