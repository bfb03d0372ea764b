//! What a plugin's message verb reads plain filters through: the query service's checks,
//! behind a trait, so the plugin API names no query service (the query service sits
//! above the plugins: it runs their filter hooks).

use crate::ctx::ConnCtx;
use crate::error::Reason;
use buzz_nostr::filter::Filter;

/// The read checks a plugin's message verb must pass its filters through; the relay
/// hands [`super::Plugin::answer_message`] its query service as one.
#[async_trait::async_trait]
pub trait PlainReads: Send + Sync {
    /// The checks a REQ of these filters gets (bounds, core's access rules —
    /// `auth-required:` for channel data before AUTH —, plugins' filter rules), for a verb
    /// that reads plain NIP-01 filters some other way (a NIP-77 reconciliation, say).
    /// `verb` names it in the refusal of a filter a plugin claims: claimed filters'
    /// answers are not plain event sets. Returns the filters, which the caller then reads
    /// within [`crate::access::AccessService::scope_for`].
    async fn check_plain(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
        verb: &str,
    ) -> Result<Vec<Filter>, Reason>;
}
