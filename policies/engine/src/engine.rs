//! [`PolicyEngine`]: the scripts of the current generation, per-thread Lua states built
//! from them on demand, hot reload and the file watcher.

use std::cell::RefCell;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::PolicyError;
use crate::facts::{ReadRequest, WriteRequest};
use crate::limits::PolicyLimits;
use crate::rate_limit::RateLimiter;
use crate::rulebook::{HasRules, Rulebook, ScriptSet, Source};
use crate::shadow::{Shadow, ShadowCounts};
use crate::verdict::Verdict;

/// Distinguishes engines in the per-thread caches.
static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's Lua states, one per live engine. A Lua state is single-threaded, and
    /// one per thread means checks never wait on each other (no global mutex). An entry is
    /// taken out while in use (so a re-entrant check builds its own instead of aliasing)
    /// and put back afterwards; entries of dropped engines are pruned then.
    static RULEBOOKS: RefCell<Vec<CachedRulebook>> = const { RefCell::new(Vec::new()) };
}

struct CachedRulebook {
    engine: u64,
    /// Dead once the engine is dropped.
    alive: Weak<()>,
    generation: u64,
    rulebook: Rulebook,
}

/// The policy engine. `Send + Sync`; share it in an `Arc`.
///
/// Checks run the scripts in a Lua state owned by the calling thread, built lazily from the
/// current generation's sources the first time a thread checks (or after a reload) and then
/// reused: a check only builds the `req` table and calls the entry points.
pub struct PolicyEngine {
    id: u64,
    /// Per-thread caches hold a `Weak` of this to notice that the engine is gone.
    alive: Arc<()>,
    access: ScriptOrigin,
    moderation: ScriptOrigin,
    limits: PolicyLimits,
    rate_limiter: Arc<dyn RateLimiter>,
    /// The last good scripts. Replaced whole by a successful reload.
    current: RwLock<Arc<ScriptSet>>,
    /// `current.generation`, readable without the lock: the per-check staleness test.
    generation: AtomicU64,
    /// Serializes reloads (SIGHUP, the watcher and explicit calls may overlap).
    reload_lock: Mutex<()>,
    /// Unix seconds of the last successful load or reload.
    loaded_at: AtomicU64,
    /// Reloads that failed (the last good scripts stayed in force).
    failed_reloads: AtomicU64,
    /// A candidate rulebook compared on live traffic (shadow mode), if any.
    shadow: Option<Shadow>,
}

impl std::fmt::Debug for PolicyEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyEngine")
            .field("access", &self.access)
            .field("moderation", &self.moderation)
            .field("limits", &self.limits)
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

impl PolicyEngine {
    /// Reads and loads both scripts. Fails if either does not read, compile or run its main
    /// chunk within the limits, or binds an entry point name to a non-function.
    pub fn load(
        access_path: &Path,
        moderation_path: &Path,
        limits: PolicyLimits,
        rate_limiter: Arc<dyn RateLimiter>,
    ) -> Result<PolicyEngine, PolicyError> {
        Self::load_scripts(
            ScriptOrigin::File(access_path.to_owned()),
            ScriptOrigin::File(moderation_path.to_owned()),
            limits,
            rate_limiter,
        )
    }

    /// Like [`PolicyEngine::load`], each script from a file or compiled in
    /// ([`ScriptOrigin::builtin_access`], [`ScriptOrigin::builtin_moderation`]). Compiled-in
    /// scripts never change, so only files are watched and reloaded.
    pub fn load_scripts(
        access: ScriptOrigin,
        moderation: ScriptOrigin,
        limits: PolicyLimits,
        rate_limiter: Arc<dyn RateLimiter>,
    ) -> Result<PolicyEngine, PolicyError> {
        let mut set = ScriptSet {
            generation: 1,
            access: access.source()?,
            moderation: moderation.source()?,
            has_rules: HasRules::default(),
        };
        set.has_rules = Rulebook::build(&set, limits, Arc::clone(&rate_limiter))?.has_rules();
        decides_access(&set, set.has_rules)?;
        tracing::info!(%access, %moderation, "policy scripts loaded");
        Ok(PolicyEngine {
            id: NEXT_ENGINE_ID.fetch_add(1, Ordering::Relaxed),
            alive: Arc::new(()),
            access,
            moderation,
            limits,
            rate_limiter,
            generation: AtomicU64::new(set.generation),
            current: RwLock::new(Arc::new(set)),
            reload_lock: Mutex::new(()),
            loaded_at: AtomicU64::new(unix_now()),
            failed_reloads: AtomicU64::new(0),
            shadow: None,
        })
    }

    /// A write: `moderate(req)` (moderation.lua) first, then `can_write(req)` (access.lua);
    /// the first deny wins. A missing entry point allows.
    pub fn check_write(&self, req: &WriteRequest) -> Result<Verdict, PolicyError> {
        let result = self.with_rulebook(|rulebook| rulebook.check_write(req));
        if let Some(shadow) = &self.shadow {
            shadow.offer_write(req, &result);
        }
        result
    }

    /// Run `candidate` in shadow mode beside this engine: it sees a copy of every check
    /// and decides nothing; disagreements are counted ([`PolicyEngine::shadow_counts`])
    /// and logged under `label`. Give the candidate its own rate limiter.
    pub fn with_shadow(
        mut self,
        candidate: Arc<PolicyEngine>,
        label: String,
    ) -> Result<Self, PolicyError> {
        let shadow = Shadow::start(candidate, label).map_err(PolicyError::Thread)?;
        self.shadow = Some(shadow);
        Ok(self)
    }

    /// Shadow-mode counts, when a candidate runs beside this engine.
    pub fn shadow_counts(&self) -> Option<ShadowCounts> {
        self.shadow.as_ref().map(|s| s.stats().counts())
    }

    /// A read: `can_read(req)` (access.lua). A missing entry point allows.
    pub fn check_read(&self, req: &ReadRequest) -> Result<Verdict, PolicyError> {
        let result = self.with_rulebook(|rulebook| rulebook.check_read(req));
        if let Some(shadow) = &self.shadow {
            shadow.offer_read(req, &result);
        }
        result
    }

    /// Re-reads and reloads both files. On failure the last good scripts stay in force, a
    /// warning is logged and the error returned.
    pub fn reload(&self) -> Result<(), PolicyError> {
        let sources = self
            .access
            .source()
            .and_then(|access| Ok((access, self.moderation.source()?)));
        match sources {
            Ok((access, moderation)) => self.install(access, moderation).map(|_| ()),
            Err(err) => {
                self.failed_reloads.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %err, "policy reload failed; keeping the last good scripts");
                Err(err)
            }
        }
    }

    /// Starts a thread that polls both files every `poll` and reloads when their contents
    /// changed and then read the same at the next poll (so a half-written file is not
    /// loaded). A broken edit is logged once and retried when the file changes again. The
    /// thread holds only a `Weak` and ends within one `poll` after the last `Arc` is dropped.
    pub fn watch(self: &Arc<Self>, poll: Duration) -> JoinHandle<()> {
        let engine = Arc::downgrade(self);
        let current = self.current_set();
        let seen = (
            current.access.text.to_string(),
            current.moderation.text.to_string(),
        );
        std::thread::Builder::new()
            .name("buzz-policy-watch".to_owned())
            .spawn(move || watch_loop(engine, poll, seen))
            .expect("cannot spawn the policy watcher thread")
    }

    /// Starts at 1 and bumps on each successful reload.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Unix seconds of the last successful load or reload.
    pub fn loaded_at(&self) -> u64 {
        self.loaded_at.load(Ordering::Relaxed)
    }

    /// Reloads that failed since start (each kept the last good scripts).
    pub fn failed_reloads(&self) -> u64 {
        self.failed_reloads.load(Ordering::Relaxed)
    }

    pub fn access(&self) -> &ScriptOrigin {
        &self.access
    }

    pub fn moderation(&self) -> &ScriptOrigin {
        &self.moderation
    }

    pub fn limits(&self) -> PolicyLimits {
        self.limits
    }

    fn current_set(&self) -> Arc<ScriptSet> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Validates the sources (a full load in a scratch state) and makes them current.
    fn install(&self, access: Source, moderation: Source) -> Result<u64, PolicyError> {
        let _serial = self
            .reload_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let current = self.current_set();
        let mut set = ScriptSet {
            generation: current.generation + 1,
            access,
            moderation,
            has_rules: HasRules::default(),
        };
        let checked = Rulebook::build(&set, self.limits, Arc::clone(&self.rate_limiter))
            .and_then(|rulebook| keeps_rules(&current, &set, rulebook.has_rules()))
            .and_then(|has_rules| decides_access(&set, has_rules));
        match checked {
            Ok(has_rules) => set.has_rules = has_rules,
            Err(err) => {
                self.failed_reloads.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %err, "policy reload failed; keeping the last good scripts");
                return Err(err);
            }
        }
        let generation = set.generation;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(set);
        self.generation.store(generation, Ordering::Release);
        self.loaded_at.store(unix_now(), Ordering::Relaxed);
        tracing::info!(
            generation,
            access = %self.access,
            moderation = %self.moderation,
            "policy scripts reloaded"
        );
        Ok(generation)
    }

    /// Runs `f` with this thread's rulebook of the current generation.
    fn with_rulebook<T>(
        &self,
        f: impl FnOnce(&Rulebook) -> Result<T, PolicyError>,
    ) -> Result<T, PolicyError> {
        let generation = self.generation();
        let cached = RULEBOOKS
            .try_with(|cell| {
                let mut cache = cell.try_borrow_mut().ok()?;
                let at = cache.iter().position(|c| c.engine == self.id)?;
                Some(cache.swap_remove(at))
            })
            .ok()
            .flatten();
        let entry = match cached {
            Some(entry) if entry.generation == generation => entry,
            _ => {
                let set = self.current_set();
                CachedRulebook {
                    engine: self.id,
                    alive: Arc::downgrade(&self.alive),
                    generation: set.generation,
                    rulebook: Rulebook::build(&set, self.limits, Arc::clone(&self.rate_limiter))?,
                }
            }
        };
        let result = f(&entry.rulebook);
        // After a memory error or a stopped run the state is dropped and rebuilt by the next
        // check, so no garbage, half-built script state or half-unwound call carries over.
        if !matches!(
            result,
            Err(PolicyError::MemoryExceeded { .. }
                | PolicyError::DeadlineExceeded { .. }
                | PolicyError::TimeLimitExceeded { .. })
        ) {
            let _ = RULEBOOKS.try_with(|cell| {
                if let Ok(mut cache) = cell.try_borrow_mut() {
                    cache.retain(|c| c.alive.strong_count() > 0);
                    cache.push(entry);
                }
            });
        }
        result
    }
}

/// Where a script comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptOrigin {
    /// A file, watched and reloaded.
    File(PathBuf),
    /// Compiled into the binary (the default rulebooks, used when no file is configured
    /// and the default paths do not exist).
    BuiltIn {
        name: &'static str,
        text: &'static str,
    },
}

impl ScriptOrigin {
    /// The default `policies/access.lua`, as compiled in.
    pub fn builtin_access() -> ScriptOrigin {
        ScriptOrigin::BuiltIn {
            name: "access.lua",
            text: include_str!("../../access.lua"),
        }
    }

    /// The default `policies/moderation.lua`, as compiled in.
    pub fn builtin_moderation() -> ScriptOrigin {
        ScriptOrigin::BuiltIn {
            name: "moderation.lua",
            text: include_str!("../../moderation.lua"),
        }
    }

    /// The current text.
    fn read(&self) -> std::io::Result<String> {
        match self {
            ScriptOrigin::File(path) => fs::read_to_string(path),
            ScriptOrigin::BuiltIn { text, .. } => Ok((*text).to_owned()),
        }
    }

    pub(crate) fn source(&self) -> Result<Source, PolicyError> {
        let text = self.read().map_err(|cause| PolicyError::Read {
            script: self.to_string(),
            cause,
        })?;
        Ok(Source {
            label: self.to_string(),
            text: text.into(),
        })
    }
}

impl std::fmt::Display for ScriptOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScriptOrigin::File(path) => write!(f, "{}", path.display()),
            ScriptOrigin::BuiltIn { name, .. } => write!(f, "built-in {name}"),
        }
    }
}

fn watch_loop(weak: Weak<PolicyEngine>, poll: Duration, mut seen: (String, String)) {
    let mut read_error_logged = false;
    // Contents that differ from `seen`, read at the previous poll. A change is loaded only
    // once two polls in a row read the same contents, so a file caught half-written is not
    // loaded; a writer stalled longer than that leaves an empty file, which `install`
    // refuses (`keeps_rules`).
    let mut pending: Option<(String, String)> = None;
    loop {
        std::thread::sleep(poll);
        let Some(engine) = weak.upgrade() else {
            tracing::debug!("policy engine dropped; watcher stops");
            return;
        };
        let on_disk = engine
            .access
            .read()
            .and_then(|access| Ok((access, engine.moderation.read()?)));
        let on_disk = match on_disk {
            Ok(contents) => {
                read_error_logged = false;
                contents
            }
            Err(err) => {
                // Editors may replace a file in two steps; only complain once per outage.
                if !read_error_logged {
                    tracing::warn!(error = %err, "policy watcher cannot read the scripts");
                    read_error_logged = true;
                }
                continue;
            }
        };
        if on_disk == seen {
            pending = None;
            continue;
        }
        if pending.as_ref() != Some(&on_disk) {
            pending = Some(on_disk);
            continue;
        }
        pending = None;
        seen = on_disk;
        let current = engine.current_set();
        if *current.access.text == *seen.0 && *current.moderation.text == *seen.1 {
            continue; // already loaded (e.g. by a SIGHUP reload)
        }
        let access = Source {
            label: engine.access.to_string(),
            text: seen.0.as_str().into(),
        };
        let moderation = Source {
            label: engine.moderation.to_string(),
            text: seen.1.as_str().into(),
        };
        // `install` logs the outcome either way.
        let _ = engine.install(access, moderation);
    }
}

/// A reload never takes away every entry point of a file that has some in force: a file
/// caught half-written (truncated by an editor or `cp` that has not written yet, however long
/// it stalls) looks exactly like that, and loading it would quietly allow everything the file
/// decided. An empty moderation file still loads at start; an access file never does
/// ([`decides_access`]).
fn keeps_rules(
    current: &ScriptSet,
    next: &ScriptSet,
    has_rules: HasRules,
) -> Result<HasRules, PolicyError> {
    let dropped = if current.has_rules.moderation && !has_rules.moderation {
        Some(&next.moderation)
    } else if current.has_rules.access && !has_rules.access {
        Some(&next.access)
    } else {
        None
    };
    match dropped {
        Some(source) => Err(PolicyError::ReloadDropsAllRules {
            script: source.label.clone(),
        }),
        None => Ok(has_rules),
    }
}

/// The access slot decides who reads and writes in channels: a script there with neither
/// `can_read` nor `can_write` (a moderation script put in the wrong slot, an empty file)
/// would allow everything, private channels included. Fail closed: never load one.
fn decides_access(set: &ScriptSet, has_rules: HasRules) -> Result<HasRules, PolicyError> {
    if has_rules.access {
        return Ok(has_rules);
    }
    Err(PolicyError::AccessWithoutRules {
        script: set.access.label.clone(),
    })
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
