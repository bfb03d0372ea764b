//! What a page and a completion both check before they answer. NIP-AR has both validate
//! the full frozen scope: the reader's access now against the access frozen at capture
//! (`scope.rs`: lost or gained channels, changed channel rows) and every captured
//! identity against the artifact state now (`verify.rs`: moved, deleted, restored,
//! redacted) — not only the entries of the page asked for, so a page after a captured
//! artifact moved resets as completion does. Both are judged in one repeatable-read
//! transaction, at one instant; the identities in one statement while nothing captured
//! changed.

use crate::error::{self, contract};
use crate::manifest::{names, Entry, Header};
use crate::plugin::{admitted, parse, Deadline, Snapshot};
use crate::request::CaptureQuery;
use crate::scope::{self, Frozen};
use crate::verify;
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use std::collections::BTreeSet;
use uuid::Uuid;

impl Snapshot {
    /// Records the capture cannot lack while its header is there; one missing means it
    /// was partly evicted: reset.
    async fn required(&self, id: &Uuid, wanted: &[String]) -> Result<Vec<String>, Reason> {
        let found = self.captures.records(&id.to_string(), wanted).await?;
        found
            .into_iter()
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| error::reset("the capture was evicted; start a new one"))
    }

    /// The frozen scope of capture `id`, and its records named `extra`.
    async fn frozen(
        &self,
        id: &Uuid,
        header: &Header,
        extra: &[String],
    ) -> Result<(Frozen, Vec<String>), Reason> {
        let mut wanted = vec![names::READABLE.to_owned(), names::CHANNELS.to_owned()];
        wanted.extend_from_slice(extra);
        let mut found = self.required(id, &wanted).await?;
        let rest = found.split_off(2);
        let frozen = Frozen {
            readable: parse::<BTreeSet<String>>(&found[0], "readable channels")?,
            channels: parse(&found[1], "captured channels")?,
            captured_at: header.captured_at,
        };
        Ok((frozen, rest))
    }

    /// Everything a capture froze: its scope, its pages as served, and their entries.
    pub(crate) async fn whole(
        &self,
        id: &Uuid,
        header: &Header,
    ) -> Result<(Frozen, Vec<String>, Vec<Entry>), Reason> {
        let names: Vec<String> = (0..header.pages).map(names::page).collect();
        let (frozen, pages) = self.frozen(id, header, &names).await?;
        let mut entries: Vec<Entry> =
            Vec::with_capacity(usize::try_from(header.entries).unwrap_or(0));
        for page in &pages {
            entries.extend(parse::<Vec<Entry>>(page, "page")?);
        }
        Ok((frozen, pages, entries))
    }

    /// The full frozen scope against database authority now: `Ok` when nothing the
    /// capture holds moved, vanished or changed access, else `snapshot_reset` (or the
    /// reader's normal admission refusal).
    pub(crate) async fn recheck(
        &self,
        ctx: &ConnCtx,
        reader: &str,
        header: &Header,
        frozen: Frozen,
        entries: Vec<Entry>,
        deadline: Deadline,
    ) -> Result<(), Reason> {
        let query = CaptureQuery::current_of(&header.query, &self.artifact_limits);
        let channels: Vec<String> = frozen.channels.keys().cloned().collect();
        let (access, community, reader) = (
            self.access.clone(),
            ctx.community.clone(),
            reader.to_owned(),
        );
        let (now, limits) = (self.clock.now_secs(), self.limits.clone());
        self.store
            .read(move |mut conn| {
                conn.repeatable_read(|conn| {
                    let authority = admitted(conn, &access, &community, &reader, now, &limits)?;
                    scope::check(&frozen, &authority)?;
                    deadline.check()?;
                    verify::check_captured(
                        conn,
                        community.id,
                        &entries,
                        &channels,
                        query.as_ref(),
                        limits.max_inspected,
                    )
                })
            })
            .await
            .map_err(contract)
    }
}
