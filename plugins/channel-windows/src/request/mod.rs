//! Which filters this plugin claims, and the request grammar of each mode.
//!
//! Claiming is decided by one marker per mode and nothing else, so a filter is either
//! wholly ours (and then judged strictly by its mode's grammar) or wholly core's:
//!
//! - `top_level` is JSON `true` → channel window. Any other value (`false`, `"true"`,
//!   `1`) is not ours: NIP-CW says such a filter is served as a normal filter.
//! - `thread_window` is `true` → thread window.
//! - `resolve_thread_roots` is `true` → thread-root recovery.
//! - exactly one `#e` value and a `depth_limit` key, with `thread_window` absent or
//!   `false` → the legacy oldest-first thread path.
//!
//! A filter carrying two markers is still claimed, by the first in that order, and its
//! grammar then rejects the mix.

mod channel;
mod fields;
mod legacy;
mod resolve;
mod thread;

pub(crate) use channel::ChannelRequest;
pub(crate) use legacy::{LegacyCursor, LegacyRequest};
pub(crate) use resolve::ResolveRequest;
pub(crate) use thread::ThreadRequest;

use buzz_core::error::Reason;
use buzz_nostr::filter::Filter;
use fields::is_true;
use serde_json::Value;

/// Limits the plugin advertises in NIP-11.
pub(crate) mod limits {
    pub(crate) use super::channel::{
        DEFAULT_LIMIT as CHANNEL_DEFAULT_LIMIT, MAX_LIMIT as CHANNEL_MAX_LIMIT,
        MIN_LIMIT as CHANNEL_MIN_LIMIT,
    };
    pub(crate) use super::legacy::{
        DEFAULT_LIMIT as LEGACY_DEFAULT_LIMIT, MAX_LIMIT as LEGACY_MAX_LIMIT, UNBOUNDED_DEPTH,
    };
    pub(crate) use super::resolve::MAX_TARGETS as RESOLVE_MAX_TARGETS;
    pub(crate) use super::thread::{
        DEFAULT_DEPTH as THREAD_DEFAULT_DEPTH, DEFAULT_LIMIT as THREAD_DEFAULT_LIMIT,
        MAX_DEPTH as THREAD_MAX_DEPTH, MAX_LIMIT as THREAD_MAX_LIMIT,
    };
    /// Most thread-window filters one query may carry.
    pub(crate) const MAX_THREAD_WINDOWS: usize = 4;
}

/// One claimed filter, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WindowRequest {
    Channel(ChannelRequest),
    Thread(ThreadRequest),
    Legacy(LegacyRequest),
    Resolve(ResolveRequest),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Channel,
    Thread,
    Legacy,
    Resolve,
}

fn mode_of(filter: &Filter) -> Option<Mode> {
    let ext = &filter.extensions;
    if is_true(ext, "top_level") {
        Some(Mode::Channel)
    } else if is_true(ext, "thread_window") {
        Some(Mode::Thread)
    } else if is_true(ext, "resolve_thread_roots") {
        Some(Mode::Resolve)
    } else if filter.tags.get("e").is_some_and(|roots| roots.len() == 1)
        && ext.contains_key("depth_limit")
        && matches!(ext.get("thread_window"), None | Some(Value::Bool(false)))
    {
        Some(Mode::Legacy)
    } else {
        None
    }
}

/// Does this plugin answer `filter`?
pub(crate) fn claims(filter: &Filter) -> bool {
    mode_of(filter).is_some()
}

/// Parse every claimed filter of one query, and check the per-query limits.
pub(crate) fn parse_batch(filters: &[Filter]) -> Result<Vec<WindowRequest>, Reason> {
    let requests = filters
        .iter()
        .map(parse)
        .collect::<Result<Vec<_>, Reason>>()?;
    let thread_windows = requests
        .iter()
        .filter(|r| matches!(r, WindowRequest::Thread(_)))
        .count();
    if thread_windows > limits::MAX_THREAD_WINDOWS {
        return Err(Reason::invalid(format!(
            "at most {} thread windows per query, got {thread_windows}",
            limits::MAX_THREAD_WINDOWS
        )));
    }
    let targets: usize = requests
        .iter()
        .map(|r| match r {
            WindowRequest::Resolve(r) => r.targets.len(),
            _ => 0,
        })
        .sum();
    if targets > limits::RESOLVE_MAX_TARGETS {
        return Err(Reason::invalid(format!(
            "resolve_thread_roots takes at most {} ids per request, got {targets}",
            limits::RESOLVE_MAX_TARGETS
        )));
    }
    Ok(requests)
}

fn parse(filter: &Filter) -> Result<WindowRequest, Reason> {
    match mode_of(filter) {
        Some(Mode::Channel) => channel::parse(filter).map(WindowRequest::Channel),
        Some(Mode::Thread) => thread::parse(filter).map(WindowRequest::Thread),
        Some(Mode::Legacy) => legacy::parse(filter).map(WindowRequest::Legacy),
        Some(Mode::Resolve) => resolve::parse(filter).map(WindowRequest::Resolve),
        None => Err(Reason::Internal(anyhow::anyhow!(
            "channel_windows was handed a filter it does not claim"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter(v: Value) -> Filter {
        Filter::parse(&v).expect("valid NIP-01 filter")
    }

    #[test]
    fn claims_only_the_four_markers() {
        let e = "e".repeat(64);
        let claimed = [
            json!({"top_level": true, "#h": ["c"]}),
            json!({"top_level": true}),
            json!({"thread_window": true}),
            json!({"resolve_thread_roots": true}),
            json!({"#e": [e], "depth_limit": 5}),
            json!({"#e": [e], "depth_limit": 5, "thread_window": false}),
            json!({"#e": [e], "depth_limit": "junk"}),
        ];
        for v in claimed {
            assert!(claims(&filter(v.clone())), "{v}");
        }
        let plain = [
            json!({"#h": ["c"]}),
            json!({"top_level": false, "#h": ["c"]}),
            json!({"top_level": "true", "#h": ["c"]}),
            json!({"top_level": 1, "#h": ["c"]}),
            json!({"thread_window": "yes"}),
            json!({"resolve_thread_roots": false}),
            json!({"#e": [e]}),
            json!({"#e": [e, e], "depth_limit": 5}),
            json!({"depth_limit": 5}),
            json!({"#e": [e], "depth_limit": 5, "thread_window": 1}),
        ];
        for v in plain {
            assert!(!claims(&filter(v.clone())), "{v}");
        }
    }

    #[test]
    fn per_query_limits() {
        let e = "e".repeat(64);
        let tw = filter(json!({"thread_window": true, "#h": ["c"], "#e": [e], "kinds": [9]}));
        assert_eq!(parse_batch(&vec![tw.clone(); 4]).expect("four").len(), 4);
        assert!(matches!(parse_batch(&vec![tw; 5]), Err(Reason::Invalid(_))));
        let ids: Vec<String> = (0..60).map(|i| format!("{i:064x}")).collect();
        let rr = filter(
            json!({"resolve_thread_roots": true, "kinds": [39005], "#h": ["c"],
            "ids": ids}),
        );
        assert!(parse_batch(std::slice::from_ref(&rr)).is_ok());
        assert!(matches!(
            parse_batch(&[rr.clone(), rr]),
            Err(Reason::Invalid(_))
        ));
    }
}
