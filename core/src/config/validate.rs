//! Checks across keys that a single value's type cannot express: one scheme of two,
//! unique community hosts, budgets that fit inside each other.

use super::Settings;

impl Settings {
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if !matches!(self.server.public_scheme.as_str(), "http" | "https") {
            anyhow::bail!("server.public_scheme must be \"http\" or \"https\"");
        }
        if self.communities.is_empty() {
            anyhow::bail!("at least one [[communities]] entry is required");
        }
        let mut hosts = std::collections::HashSet::new();
        for c in &self.communities {
            let host = buzz_nostr::host::normalize_host(&c.host);
            if host.is_empty() {
                anyhow::bail!("community host must not be empty");
            }
            if !hosts.insert(host.clone()) {
                anyhow::bail!("community host {host} is configured twice");
            }
            for owner in &c.owners {
                if owner.len() != 64 || hex::decode(owner).is_err() {
                    anyhow::bail!("community {host}: owner {owner:?} is not a 64-hex pubkey");
                }
            }
        }
        if let Err(err) = tracing_subscriber::EnvFilter::builder().parse(&self.log.level) {
            anyhow::bail!(
                "log.level {:?} is not a tracing filter: {err}",
                self.log.level
            );
        }
        // A batch of none would purge nothing, and a tick would never see a short batch.
        if self.storage.expired_purge_batch == 0 {
            anyhow::bail!("storage.expired_purge_batch must be at least 1");
        }
        let l = &self.limits;
        // One connection's budget must fit in the relay-wide one, or it could never fill.
        if l.max_outbound_bytes == 0 || l.max_outbound_bytes > l.max_outbound_bytes_total {
            anyhow::bail!(
                "limits.max_outbound_bytes must be between 1 and limits.max_outbound_bytes_total"
            );
        }
        if l.outbound_stall_secs == 0 {
            anyhow::bail!("limits.outbound_stall_secs must be at least 1");
        }
        // One largest body must fit, or such a request could never be received.
        if l.max_pending_body_bytes < l.max_message_bytes {
            anyhow::bail!(
                "limits.max_pending_body_bytes must be at least limits.max_message_bytes"
            );
        }
        if u32::try_from(l.max_pending_body_bytes).is_err() {
            anyhow::bail!("limits.max_pending_body_bytes must be below 4 GiB");
        }
        if l.body_timeout_secs == 0 {
            anyhow::bail!("limits.body_timeout_secs must be at least 1");
        }
        Ok(())
    }
}
