//! `[plugins.snapshot]`: the transport's limits. The defaults are NIP-AR's table for
//! version 1 (advertised in NIP-11 under `artifacts.snapshot`) and its fixed bounds; an
//! operator may only tighten them.
//!
//! The shared limits (captures and charged bytes) keep a reserve for every community:
//! counted against the community a capture was started in, a community may take what is
//! free less the other communities' unused reserves, so no community's readers —
//! throwaway keys included — can take what another community needs, while a relay of one
//! community gives it NIP-AR's limits whole. Every bound holds on its own: a reader's,
//! the other communities' reserves and the relay's.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The section's keys besides `enabled`, with their defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Most entries one capture holds; more refuses the capture (`maxRows`).
    pub max_rows: usize,
    /// Most entries per manifest page (`pageRows`).
    pub page_rows: usize,
    /// Most bytes of one page response (`pageBytes`).
    pub page_bytes: usize,
    /// Most revisions one bodies request names (`bodyRows`).
    pub body_rows: usize,
    /// Most bytes of one bodies response, and so of any single body (`bodyBytes`).
    pub body_bytes: usize,
    /// A capture's fixed lifetime from registration (`lifetimeSeconds`).
    pub lifetime_seconds: u64,
    /// Most memberships, readable channels and current candidates one operation inspects.
    pub max_inspected: usize,
    /// Most bytes of one capture's manifest (header, pages, scope; the direct body
    /// records sit beside it and count only against the shared charge).
    pub max_manifest_bytes: usize,
    /// Captures (and registration leases) alive at once, shared by every process.
    pub max_captures: usize,
    /// Bytes of manifests charged at once, shared by every process.
    pub max_charged_bytes: usize,
    /// Captures (and registration leases) of `max_captures` kept free for each
    /// community whatever the others hold (0 to NIP-AR's 32; with `n` communities at
    /// most a `1/n` part of `max_captures` each); the rest is first come, first served.
    pub captures_reserved_per_community: usize,
    /// Bytes of `max_charged_bytes` kept free for each community the same way.
    pub charged_bytes_reserved_per_community: usize,
    /// Captures one reader holds at once in one community.
    pub captures_per_reader: usize,
    /// Snapshot operations one process runs at once.
    pub concurrent_operations: usize,
    /// Bound of each SQL statement (milliseconds; PostgreSQL enforces it in-statement).
    pub statement_ms: u64,
    /// Bound of each whole operation, access checks included (milliseconds).
    pub operation_ms: u64,
}

/// NIP-AR's values for version 1.
impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_rows: 50_000,
            page_rows: 1_000,
            page_bytes: 262_144,
            body_rows: 100,
            body_bytes: 8_388_608,
            lifetime_seconds: 300,
            max_inspected: 50_000,
            max_manifest_bytes: 16 * 1024 * 1024,
            max_captures: 32,
            max_charged_bytes: 64 * 1024 * 1024,
            // Two readers at their two captures each, whatever other communities do.
            captures_reserved_per_community: 4,
            // One maxRows capture of ordinary ids (charged 16.65 MiB).
            charged_bytes_reserved_per_community: 17 * 1024 * 1024,
            captures_per_reader: 2,
            concurrent_operations: 4,
            statement_ms: 2_000,
            operation_ms: 8_000,
        }
    }
}

/// Room a page response needs besides its entries (version, token, expiry, cursor).
pub(crate) const PAGE_ENVELOPE_BYTES: usize = 512;

impl Limits {
    /// Checks serde cannot express: every bound positive, none above the spec's.
    pub fn validate(&self) -> anyhow::Result<()> {
        let spec = Limits::default();
        let bounds = [
            ("max_rows", self.max_rows, spec.max_rows),
            ("page_rows", self.page_rows, spec.page_rows),
            ("page_bytes", self.page_bytes, spec.page_bytes),
            ("body_rows", self.body_rows, spec.body_rows),
            ("body_bytes", self.body_bytes, spec.body_bytes),
            ("max_inspected", self.max_inspected, spec.max_inspected),
            (
                "max_manifest_bytes",
                self.max_manifest_bytes,
                spec.max_manifest_bytes,
            ),
            ("max_captures", self.max_captures, spec.max_captures),
            (
                "max_charged_bytes",
                self.max_charged_bytes,
                spec.max_charged_bytes,
            ),
            (
                "captures_per_reader",
                self.captures_per_reader,
                spec.captures_per_reader,
            ),
            (
                "concurrent_operations",
                self.concurrent_operations,
                spec.concurrent_operations,
            ),
        ];
        for (name, value, max) in bounds {
            if value == 0 || value > max {
                anyhow::bail!("{name} must be between 1 and {max} (NIP-AR version 1)");
            }
        }
        // A reserve may be 0 (none kept). It is kept only within the relay's own limit
        // (`n` communities keep at most `1/n` of it each), so a lowered limit needs no
        // lowered reserve.
        for (name, value, max) in [
            (
                "captures_reserved_per_community",
                self.captures_reserved_per_community,
                spec.max_captures,
            ),
            (
                "charged_bytes_reserved_per_community",
                self.charged_bytes_reserved_per_community,
                spec.max_charged_bytes,
            ),
        ] {
            if value > max {
                anyhow::bail!("{name} must be between 0 and {max}");
            }
        }
        // The smallest page must hold one entry beside the response's envelope.
        if self.page_bytes < PAGE_ENVELOPE_BYTES + 256 {
            anyhow::bail!("page_bytes must be at least {}", PAGE_ENVELOPE_BYTES + 256);
        }
        if !(1..=spec.lifetime_seconds).contains(&self.lifetime_seconds) {
            anyhow::bail!(
                "lifetime_seconds must be between 1 and {}",
                spec.lifetime_seconds
            );
        }
        if !(1..=spec.statement_ms).contains(&self.statement_ms) {
            anyhow::bail!("statement_ms must be between 1 and {}", spec.statement_ms);
        }
        if !(self.statement_ms..=spec.operation_ms).contains(&self.operation_ms) {
            anyhow::bail!(
                "operation_ms must be between statement_ms and {}",
                spec.operation_ms
            );
        }
        Ok(())
    }

    /// The NIP-11 `artifacts.snapshot` object.
    pub fn nip11(&self) -> Value {
        json!({
            "version": 1,
            "maxRows": self.max_rows,
            "pageRows": self.page_rows,
            "pageBytes": self.page_bytes,
            "bodyRows": self.body_rows,
            "bodyBytes": self.body_bytes,
            "lifetimeSeconds": self.lifetime_seconds,
            "permanentChannelsOnly": true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_reserves_leave_a_remainder() {
        let limits = Limits::default();
        limits.validate().expect("the defaults are valid");
        assert!(limits.captures_reserved_per_community < limits.max_captures);
        assert!(limits.charged_bytes_reserved_per_community < limits.max_charged_bytes);
        assert!(limits.captures_per_reader <= limits.captures_reserved_per_community);
    }

    #[test]
    fn community_reserves_are_bounded() {
        for (key, value) in [
            ("captures_reserved_per_community", 33),
            ("charged_bytes_reserved_per_community", 64 * 1024 * 1024 + 1),
        ] {
            let mut limits = Limits::default();
            match key {
                "captures_reserved_per_community" => limits.captures_reserved_per_community = value,
                _ => limits.charged_bytes_reserved_per_community = value,
            }
            let err = limits.validate().expect_err(key).to_string();
            assert!(err.starts_with(key), "{err}");
        }
        // None kept is valid; so is all of a lowered relay-wide limit.
        let none = Limits {
            captures_reserved_per_community: 0,
            charged_bytes_reserved_per_community: 0,
            ..Limits::default()
        };
        none.validate().expect("valid");
        // A reserve above a lowered relay-wide limit is simply kept within it.
        let lowered = Limits {
            max_captures: 3,
            max_charged_bytes: 1024 * 1024,
            ..Limits::default()
        };
        lowered.validate().expect("valid");
    }
}
