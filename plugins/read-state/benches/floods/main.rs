//! `floods`: the figures of three attack findings on the read-state plugin, printed so a
//! run before and after a change can be compared. Not a timed test: it only measures.
//!
//! - `threads`: an attacker posts K top-level messages that p-tag a victim and a reply
//!   to each (the victim follows every one of those threads, each with an unread
//!   reply); then the victim's sidebar row of that channel (`channel_ids=`) is fetched
//!   again and again: p50/p99, status, answer bytes, threads listed, and — when rows
//!   carry `threads_next_cursor` — what paging through every thread costs. K from
//!   `--threads` (default 4000,5000).
//! - `victims`: replies that p-tag 20 victims (`--victim-threads` threads); the 20
//!   victims then load their sidebars at once while an unrelated user sends REQs in
//!   another channel: the victims' sidebar p50 and the unrelated REQ p50, before and
//!   after the flood.
//! - `mentions`: messages with 1,999 p tags (plus the `h` tag: the relay's 2,000-tag
//!   limit), naming non-members and then channel members: relay CPU per message
//!   (this process's threads, the bench client's excluded; on PostgreSQL also the
//!   machine's postgres processes), the message's EVENT->OK, read-state rows written per
//!   message, and another connection's EVENT->OK p50/p99 alone and while one attacker
//!   connection keeps sending such messages.
//! - `plans` (PostgreSQL only): 10k top-level messages ingested on a fresh database whose
//!   tables have autovacuum off, so no statistics ever change; messages per second of
//!   the first and the last 1k, and sequential scans per table afterwards.
//!
//! ```text
//! cargo bench -p buzz-read-state --bench floods -- --case threads            # SQLite
//! cargo bench -p buzz-read-state --bench floods -- --case threads \
//!     --database-url postgres://postgres@127.0.0.1:5432/postgres              # PostgreSQL
//! cargo bench -p buzz-read-state --bench floods -- --case mentions [--database-url …]
//! cargo bench -p buzz-read-state --bench floods -- --case victims [--database-url …]
//! cargo bench -p buzz-read-state --bench floods -- --case plans \
//!     --database-url postgres://postgres@127.0.0.1:5432/postgres
//! ```
//!
//! The relay runs in this process on its own runtime; the bench client runs on threads
//! named `bench-client`, whose CPU is not counted as the relay's.

use anyhow::{bail, Context};
use buzz_core::config::PluginSection;
use buzz_core::plugin::PluginEntry;
use buzz_core::relay::{RelayBuilder, RunningRelay};
use buzz_core::testkit::{now, percentile, BenchStorage, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_read_state::{ReadStatePlugin, NAME};
use buzz_read_state_client::{self as client, Client};
use clap::{Parser, ValueEnum};
use diesel::{Connection, QueryableByName, RunQueryDsl};
use serde_json::{json, Value};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod cpu;
mod harness;
mod mentions;
mod plans;
mod threads;

use harness::*;
use mentions::mentions_case;
use plans::plans_case;
use threads::{threads_case, victims_case};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Case {
    Threads,
    Victims,
    Mentions,
    Plans,
}

#[derive(Parser, Debug)]
#[command(name = "floods", about = "read-state attack figures")]
struct Args {
    /// What to measure (repeatable).
    #[arg(long, value_enum, default_values_t = [Case::Threads])]
    case: Vec<Case>,
    /// PostgreSQL admin URL (a scratch database is made there); default SQLite.
    #[arg(long)]
    database_url: Option<String>,
    /// `threads`: attacker threads per run (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [4_000, 5_000])]
    threads: Vec<usize>,
    /// `victims`: attacker threads whose replies p-tag the 20 victims.
    #[arg(long, default_value_t = 1_000)]
    victim_threads: usize,
    /// Timed sidebar requests per run.
    #[arg(long, default_value_t = 50)]
    iterations: usize,
    /// `mentions`: timed 1,999-p-tag messages per variant.
    #[arg(long, default_value_t = 40)]
    mention_events: usize,
    /// `mentions`: p tags per message (the relay allows 2,000 tags with the `h` tag).
    #[arg(long, default_value_t = 1_999)]
    p_tags: usize,
    /// `mentions`: messages signed for the attacker's flood phase.
    #[arg(long, default_value_t = 600)]
    flood_events: usize,
    /// `mentions`: seconds of each EVENT->OK phase of the other connection.
    #[arg(long, default_value_t = 5)]
    phase_secs: u64,
    /// `plans`: top-level messages ingested.
    #[arg(long, default_value_t = 10_000)]
    roots: usize,
    /// `plans`, `mentions`: run without the read-state plugin (core's share alone).
    #[arg(long)]
    without_plugin: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let command: Vec<String> = std::env::args().collect();
    println!("command: {}", command.join(" "));
    // The relay's runtime; the client gets one of its own (threads named bench-client).
    let relay_rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("relay runtime")?;
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bench-client")
        .enable_all()
        .build()
        .context("client runtime")?;
    let relay = Arc::new(relay_rt);
    client_rt.block_on(async {
        for case in &args.case {
            match case {
                Case::Threads => {
                    for &k in &args.threads {
                        threads_case(&args, &relay, k).await?;
                    }
                }
                Case::Victims => victims_case(&args, &relay).await?,
                Case::Mentions => mentions_case(&args, &relay).await?,
                Case::Plans => plans_case(&args, &relay).await?,
            }
        }
        Ok(())
    })
}
