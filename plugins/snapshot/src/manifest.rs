//! A capture's stored form: its header, immutable pages, one direct record per captured
//! revision, and the frozen scope — as named records, the same names and values in
//! Redis (one hash field each) and in the embedded store (one row each).
//!
//! | record | value |
//! |---|---|
//! | `h` | [`Header`] (JSON) |
//! | `p:<n>` | page `n`: the JSON array of its entries, exactly as served |
//! | `b:<revision id>` | `[artifactId, channelId, channel fingerprint]`: what a body read checks |
//! | `k` | captured channel → fingerprint of its row at capture (JSON object) |
//! | `r` | every channel the reader could read at capture (JSON array) |
//! | `s:<n>` | page `n` was served (not charged) |

use crate::error;
use crate::limits::{Limits, PAGE_ENVELOPE_BYTES};
use buzz_core::error::Reason;
use buzz_core::store::channel_state::ChannelRow;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// One captured identity, as the wire shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    #[serde(rename = "artifactId")]
    pub artifact_id: String,
    #[serde(rename = "revisionId")]
    pub revision_id: String,
    #[serde(rename = "channelId")]
    pub channel_id: String,
}

/// What is known about a capture without reading its pages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub id: String,
    pub community: i64,
    pub reader: String,
    /// The capture query, canonical.
    pub query: String,
    pub created_ms: i64,
    /// Fixed at registration; reads never extend it.
    pub expires_ms: i64,
    /// When the scope was decided (epoch seconds): channels created later are new, not
    /// a change of access.
    pub captured_at: i64,
    pub entries: u64,
    pub pages: u32,
    /// Bytes charged against the shared quota (every record but the served marks).
    pub bytes: u64,
}

/// Record names.
pub(crate) mod names {
    pub(crate) const HEADER: &str = "h";
    pub(crate) const READABLE: &str = "r";
    pub(crate) const CHANNELS: &str = "k";

    pub(crate) fn page(n: u32) -> String {
        format!("p:{n}")
    }

    pub(crate) fn body(revision_id: &str) -> String {
        format!("b:{revision_id}")
    }

    pub(crate) fn is_body(name: &str) -> bool {
        name.starts_with("b:")
    }

    pub(crate) fn served(n: u32) -> String {
        format!("s:{n}")
    }
}

/// A capture ready to register.
#[derive(Debug, Clone)]
pub(crate) struct Manifest {
    pub header: Header,
    /// Every record, the header included.
    pub records: Vec<(String, String)>,
    /// Page 0's entries as served in the start response.
    pub first_page: String,
}

/// A channel row as one short value: any change of name, type, privacy, archive, TTL
/// or deletion changes it. Captured channels whose row changed require a reset.
pub(crate) fn fingerprint(row: &ChannelRow) -> String {
    let text = format!(
        "{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}\u{0}{:?}\u{0}{:?}\u{0}{:?}\u{0}{}\u{0}{}",
        row.id,
        row.name,
        row.about,
        row.private,
        row.channel_type,
        row.archived,
        row.ttl_seconds,
        row.expires_at,
        row.deleted_at,
        row.created_by,
        row.created_at,
    );
    hex::encode(&Sha256::digest(text.as_bytes())[..8])
}

fn json<T: Serialize>(value: &T) -> Result<String, Reason> {
    serde_json::to_string(value).map_err(|e| Reason::Internal(e.into()))
}

/// The facts a capture is built from.
pub(crate) struct Captured<'a> {
    pub id: &'a str,
    pub community: i64,
    pub reader: &'a str,
    pub query: &'a str,
    pub now_ms: i64,
    pub captured_at: i64,
    pub entries: Vec<Entry>,
    /// Every readable channel with its row.
    pub readable: &'a BTreeMap<String, ChannelRow>,
}

/// Cut the entries into pages and write every record. Over the manifest bound →
/// `snapshot_limit` (never truncated).
pub(crate) fn build(c: Captured<'_>, limits: &Limits) -> Result<Manifest, Reason> {
    let budget = limits.page_bytes - PAGE_ENVELOPE_BYTES;
    let mut pages: Vec<String> = Vec::new();
    let mut page = String::from("[");
    let mut rows = 0usize;
    let mut records: Vec<(String, String)> = Vec::with_capacity(c.entries.len() + 64);
    let mut channels: BTreeMap<&str, String> = BTreeMap::new();
    for entry in &c.entries {
        let text = json(entry)?;
        // `[` + entries joined by `,` + `]`.
        let grown = page.len() + usize::from(rows > 0) + text.len() + 1;
        if rows > 0 && (rows == limits.page_rows || grown > budget) {
            page.push(']');
            pages.push(std::mem::replace(&mut page, String::from("[")));
            rows = 0;
        }
        if rows > 0 {
            page.push(',');
        }
        page.push_str(&text);
        rows += 1;
        let row = c.readable.get(&entry.channel_id).ok_or_else(|| {
            Reason::Internal(anyhow::anyhow!(
                "captured artifact {} in channel {} outside the decided scope",
                entry.artifact_id,
                entry.channel_id
            ))
        })?;
        let print = channels
            .entry(entry.channel_id.as_str())
            .or_insert_with(|| fingerprint(row))
            .clone();
        records.push((
            names::body(&entry.revision_id),
            json(&[&entry.artifact_id, &entry.channel_id, &print])?,
        ));
    }
    page.push(']');
    pages.push(page);
    let first_page = pages[0].clone();
    let page_count = u32::try_from(pages.len()).map_err(|e| Reason::Internal(e.into()))?;
    for (n, page) in (0u32..).zip(pages) {
        records.push((names::page(n), page));
    }
    records.push((names::CHANNELS.into(), json(&channels)?));
    let readable: BTreeSet<&String> = c.readable.keys().collect();
    records.push((names::READABLE.into(), json(&readable)?));
    let mut header = Header {
        id: c.id.to_owned(),
        community: c.community,
        reader: c.reader.to_owned(),
        query: c.query.to_owned(),
        created_ms: c.now_ms,
        expires_ms: c.now_ms + (limits.lifetime_seconds as i64) * 1000,
        captured_at: c.captured_at,
        entries: c.entries.len() as u64,
        pages: page_count,
        bytes: 0,
    };
    // The spec bounds the manifest (pages, scope, header) at 16 MiB and keeps the direct
    // body records beside it; both are charged against the shared quota. Counting the
    // body records into the bound would refuse a maxRows capture of ordinary ids.
    let size = |(n, v): &(String, String)| n.len() + v.len();
    let bodies: usize = records
        .iter()
        .filter(|(n, _)| names::is_body(n))
        .map(size)
        .sum();
    let others: usize = records
        .iter()
        .filter(|(n, _)| !names::is_body(n))
        .map(size)
        .sum();
    // The header's own size, with room for the digits of `bytes` itself.
    let manifest = others + names::HEADER.len() + json(&header)?.len() + 20;
    if manifest > limits.max_manifest_bytes {
        return Err(error::limit(format!(
            "the capture's manifest would take {manifest} bytes; at most {} (narrow the query)",
            limits.max_manifest_bytes
        )));
    }
    header.bytes = (manifest + bodies) as u64;
    records.push((names::HEADER.into(), json(&header)?));
    Ok(Manifest {
        header,
        records,
        first_page,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str) -> ChannelRow {
        ChannelRow {
            community_id: 1,
            id: id.into(),
            name: "n".into(),
            about: String::new(),
            private: false,
            channel_type: "stream".into(),
            archived: false,
            ttl_seconds: None,
            created_by: "x".into(),
            created_at: 1,
            expires_at: None,
            deleted_at: None,
        }
    }

    fn entries(n: usize) -> Vec<Entry> {
        (0..n)
            .map(|i| Entry {
                artifact_id: format!("{i:036}"),
                revision_id: format!("{i:064}"),
                channel_id: "c".into(),
            })
            .collect()
    }

    /// `n` entries with ids shaped like production's (UUID artifact and channel ids,
    /// 64-hex revision ids) over `channels` channels.
    fn realistic(n: usize, channels: usize) -> (Vec<Entry>, BTreeMap<String, ChannelRow>) {
        let channel = |i: usize| format!("{:08x}-0000-4000-8000-{:012x}", i, i);
        let readable = (0..channels)
            .map(|i| (channel(i), row(&channel(i))))
            .collect();
        let entries = (0..n)
            .map(|i| Entry {
                artifact_id: format!("{:08x}-1111-4000-8000-{:012x}", i, i),
                revision_id: format!("{i:064x}"),
                channel_id: channel(i % channels),
            })
            .collect();
        (entries, readable)
    }

    fn capture(
        entries: Vec<Entry>,
        readable: &BTreeMap<String, ChannelRow>,
        limits: &Limits,
    ) -> Result<Manifest, Reason> {
        build(
            Captured {
                id: "id",
                community: 1,
                reader: "r",
                query: "{}",
                now_ms: 0,
                captured_at: 0,
                entries,
                readable,
            },
            limits,
        )
    }

    #[test]
    fn a_max_rows_capture_fits_the_manifest_bound() {
        let limits = Limits::default();
        let (entries, readable) = realistic(limits.max_rows, 100);
        let m = capture(entries, &readable, &limits).expect("50,000 rows fit");
        let bodies: usize = m
            .records
            .iter()
            .filter(|(n, _)| names::is_body(n))
            .map(|(n, v)| n.len() + v.len())
            .sum();
        let charged = usize::try_from(m.header.bytes).expect("bytes");
        assert!(charged - bodies <= limits.max_manifest_bytes, "{charged}");
        // The charge counts the body records too: what Redis or the database holds.
        let stored: usize = m.records.iter().map(|(n, v)| n.len() + v.len()).sum();
        assert!(charged >= stored, "{charged} < {stored}");
        assert!(charged < limits.max_charged_bytes / 3, "{charged}");
        // And one community's reserve of the bytes holds one.
        assert!(
            charged <= limits.charged_bytes_reserved_per_community,
            "{charged}"
        );
    }

    #[test]
    fn a_manifest_over_its_bound_is_refused_not_cut() {
        let limits = Limits {
            max_manifest_bytes: 64 * 1024,
            ..Limits::default()
        };
        let (entries, readable) = realistic(1_000, 10);
        let err = capture(entries, &readable, &limits).expect_err("over the bound");
        assert_eq!(err.http_status(), 413, "{err}");
        assert!(err.to_string().contains("at most 65536"), "{err}");
        let (entries, readable) = realistic(100, 10);
        capture(entries, &readable, &limits).expect("a small capture fits");
    }

    fn pages_of(n: usize, limits: &Limits) -> Vec<Vec<Entry>> {
        let readable = BTreeMap::from([("c".to_string(), row("c"))]);
        let m = build(
            Captured {
                id: "id",
                community: 1,
                reader: "r",
                query: "{}",
                now_ms: 0,
                captured_at: 0,
                entries: entries(n),
                readable: &readable,
            },
            limits,
        )
        .expect("builds");
        (0..m.header.pages)
            .map(|p| {
                let text = &m
                    .records
                    .iter()
                    .find(|(k, _)| *k == names::page(p))
                    .expect("page")
                    .1;
                assert!(text.len() + PAGE_ENVELOPE_BYTES <= limits.page_bytes);
                serde_json::from_str(text).expect("page JSON")
            })
            .collect()
    }

    #[test]
    fn an_exact_multiple_has_no_empty_final_page() {
        let limits = Limits {
            page_rows: 10,
            ..Limits::default()
        };
        let pages = pages_of(20, &limits);
        assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), vec![10, 10]);
        assert_eq!(pages_of(0, &limits), vec![Vec::<Entry>::new()]);
        assert_eq!(pages_of(21, &limits).len(), 3);
    }

    #[test]
    fn pages_respect_the_byte_bound() {
        let limits = Limits {
            page_bytes: PAGE_ENVELOPE_BYTES + 1_000,
            ..Limits::default()
        };
        let pages = pages_of(50, &limits);
        assert!(pages.len() > 5, "{}", pages.len());
        assert_eq!(pages.concat(), entries(50));
    }

    #[test]
    fn fingerprints_follow_every_row_change() {
        let base = row("c");
        let ttl = ChannelRow {
            ttl_seconds: Some(60),
            ..base.clone()
        };
        let renamed = ChannelRow {
            name: "m".into(),
            ..base.clone()
        };
        assert_eq!(fingerprint(&base), fingerprint(&row("c")));
        assert_ne!(fingerprint(&base), fingerprint(&ttl));
        assert_ne!(fingerprint(&base), fingerprint(&renamed));
    }
}
