//! A [`Rulebook`]: both scripts of one generation loaded into one sandbox, with their entry
//! points resolved once so that a check only builds `req` and calls functions.

use std::sync::Arc;

use mlua::Function;

use crate::error::PolicyError;
use crate::facts::{ReadRequest, WriteRequest};
use crate::limits::PolicyLimits;
use crate::rate_limit::RateLimiter;
use crate::sandbox::Sandbox;
use crate::verdict::Verdict;

/// One script's text and the name it is reported under (its path).
#[derive(Debug, Clone)]
pub(crate) struct Source {
    pub(crate) label: String,
    pub(crate) text: Arc<str>,
}

/// Which file defines any of its entry points.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct HasRules {
    /// moderation.lua defines `moderate`.
    pub(crate) moderation: bool,
    /// access.lua defines `can_write` or `can_read`.
    pub(crate) access: bool,
}

/// The scripts of one generation.
#[derive(Debug)]
pub(crate) struct ScriptSet {
    pub(crate) generation: u64,
    pub(crate) access: Source,
    pub(crate) moderation: Source,
    /// [`Rulebook::has_rules`] of these scripts.
    pub(crate) has_rules: HasRules,
}

/// Field order matters: the entry points are dropped before their sandbox.
pub(crate) struct Rulebook {
    access: String,
    moderation: String,
    moderate: Option<Function>,
    can_write: Option<Function>,
    can_read: Option<Function>,
    sandbox: Sandbox,
}

impl Rulebook {
    pub(crate) fn build(
        set: &ScriptSet,
        limits: PolicyLimits,
        limiter: Arc<dyn RateLimiter>,
    ) -> Result<Rulebook, PolicyError> {
        let sandbox = Sandbox::new(limits, limiter)?;
        let moderation = sandbox.load(&set.moderation.label, &set.moderation.text)?;
        let access = sandbox.load(&set.access.label, &set.access.text)?;
        Ok(Rulebook {
            moderate: sandbox.entry(&moderation, "moderate")?,
            can_write: sandbox.entry(&access, "can_write")?,
            can_read: sandbox.entry(&access, "can_read")?,
            access: access.label,
            moderation: moderation.label,
            sandbox,
        })
    }

    pub(crate) fn has_rules(&self) -> HasRules {
        HasRules {
            moderation: self.moderate.is_some(),
            access: self.can_write.is_some() || self.can_read.is_some(),
        }
    }

    /// `moderate(req)`, then `can_write(req)`; the first deny wins, a missing entry point
    /// allows. Both share one instruction budget.
    pub(crate) fn check_write(&self, request: &WriteRequest) -> Result<Verdict, PolicyError> {
        if self.moderate.is_none() && self.can_write.is_none() {
            return Ok(Verdict::Allow);
        }
        self.sandbox.begin(request.now)?;
        self.sandbox.with_tags(request, |tags_of| {
            let table = self.sandbox.write_req(request, tags_of)?;
            if let Some(moderate) = &self.moderate {
                let verdict = self
                    .sandbox
                    .call(&self.moderation, "moderate", moderate, &table)?;
                if !verdict.is_allow() {
                    return Ok(verdict);
                }
            }
            match &self.can_write {
                Some(can_write) => self
                    .sandbox
                    .call(&self.access, "can_write", can_write, &table),
                None => Ok(Verdict::Allow),
            }
        })
    }

    /// `can_read(req)`; a missing entry point allows.
    pub(crate) fn check_read(&self, request: &ReadRequest) -> Result<Verdict, PolicyError> {
        let Some(can_read) = &self.can_read else {
            return Ok(Verdict::Allow);
        };
        self.sandbox.begin(request.now)?;
        let table = self.sandbox.read_req(request)?;
        self.sandbox
            .call(&self.access, "can_read", can_read, &table)
    }
}
