//! NIP-AR snapshot paging: reopen a capture from its token and answer one manifest page,
//! and complete it (drop the capture, release its charge).

use crate::error::{self};
use crate::manifest::{names, Header};
use crate::token::Tokens;
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use serde_json::{json, Value};
use uuid::Uuid;

use super::bounds::{parse, Deadline};
use super::Snapshot;

impl Snapshot {
    /// The capture `token` names for this reader here, and its header. A token that was
    /// not issued to this reader in this community is refused exactly as a made-up one.
    pub(super) async fn open(
        &self,
        ctx: &ConnCtx,
        reader: &str,
        token: &str,
    ) -> Result<(Uuid, Header), Reason> {
        let id = self
            .tokens
            .open_token(token, reader, ctx.community.id)
            .ok_or_else(|| error::invalid("unknown snapshot token"))?;
        let header = self
            .captures
            .records(&id.to_string(), &[names::HEADER.into()])
            .await?
            .pop()
            .flatten()
            .ok_or_else(|| error::reset("the capture expired or was evicted; start a new one"))?;
        let header: Header = parse(&header, "header")?;
        if header.reader != reader || header.community != ctx.community.id {
            return Err(error::invalid("unknown snapshot token"));
        }
        if header.expires_ms <= self.now_ms() {
            return Err(error::reset("the capture expired; start a new one"));
        }
        Ok((id, header))
    }

    pub(super) async fn page(
        &self,
        ctx: &ConnCtx,
        reader: &str,
        token: &str,
        cursor: &str,
        deadline: Deadline,
    ) -> Result<Value, Reason> {
        let (id, header) = self.open(ctx, reader, token).await?;
        let n = self
            .tokens
            .open_cursor(&id, cursor)
            .filter(|n| *n < header.pages)
            .ok_or_else(|| error::invalid("unknown cursor for this capture"))?;
        let (frozen, pages, entries) = self.whole(&id, &header).await?;
        deadline.check()?;
        self.recheck(ctx, reader, &header, frozen, entries, deadline)
            .await?;
        deadline.check()?;
        if !self.captures.mark_served(&id.to_string(), n).await? {
            return Err(error::reset("the capture was evicted; start a new one"));
        }
        let page = usize::try_from(n)
            .ok()
            .and_then(|n| pages.get(n))
            .ok_or_else(|| {
                Reason::Internal(anyhow::anyhow!("page {n} of {} missing", header.pages))
            })?;
        page_answer(&self.tokens, &id, token, &header, n, page)
    }

    pub(super) async fn complete(
        &self,
        ctx: &ConnCtx,
        reader: &str,
        token: &str,
        deadline: Deadline,
    ) -> Result<Value, Reason> {
        let (id, header) = self.open(ctx, reader, token).await?;
        let marks: Vec<String> = (0..header.pages).map(names::served).collect();
        let served = self.captures.records(&id.to_string(), &marks).await?;
        if let Some(skipped) = served.iter().position(Option::is_none) {
            return Err(error::invalid(format!(
                "page {skipped} of this capture was never fetched; fetch every page, then complete"
            )));
        }
        let (frozen, _pages, entries) = self.whole(&id, &header).await?;
        deadline.check()?;
        self.recheck(ctx, reader, &header, frozen, entries, deadline)
            .await?;
        deadline.check()?;
        Ok(json!({"version": 1, "token": token, "complete": true}))
    }
}

/// A start or page response.
pub(super) fn page_answer(
    tokens: &Tokens,
    id: &Uuid,
    token: &str,
    header: &Header,
    n: u32,
    page: &str,
) -> Result<Value, Reason> {
    let entries: Value = parse(page, "page")?;
    let next = (n + 1 < header.pages).then(|| tokens.cursor(id, n + 1));
    Ok(json!({
        "version": 1,
        "token": token,
        "expiresAt": header.expires_ms.div_euclid(1_000),
        "entries": entries,
        "nextToken": next,
    }))
}
