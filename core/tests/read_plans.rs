//! Every read shape the query builder emits is served by an index that matches it, on a
//! community whose rows make the wrong plan the natural one (issue 45): most rows are
//! channel messages of one kind, a few are community-wide, so a walk of
//! `events_by_time` that filters `channel_id IS NULL`, `kind` or `pubkey` row by row reads
//! the whole community before it finds its first match.
//!
//! How: `testkit::statements` records the statements the read threads run for each
//! shape (REQ's `query_keys`, NIP-77's `query_stamps`, COUNT's `count_matching`, as the
//! anonymous and a member reader send them), then each is explained on the same database
//! (`EXPLAIN QUERY PLAN` on SQLite with the statistics the relay takes itself; `EXPLAIN`
//! with the values bound on PostgreSQL, after `ANALYZE`) and its plan must name the
//! index the shape needs and never walk the time index. The tag shapes are explained once
//! more on PostgreSQL tables never analysed, where the tag walk must hold as well.

use buzz_core::error::Reason;
use buzz_core::store::{
    append_point, appended_stamps, count_matching, query_keys, query_stamps, AppendPoint,
    ChannelScope, ChannelSet, Conn, Scope,
};
use buzz_core::testkit::statements::{record_statements_of, start_recording, stop_recording};
use buzz_core::testkit::{now, TestBackend, TestRelay};
use buzz_nostr::filter::Filter;
use diesel::connection::SimpleConnection;
use diesel::RunQueryDsl;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The read threads' name (`store/read_workers.rs`).
const READ_THREAD: &str = "buzz-store-read";
/// Channel messages (kind 9), spread over `CHANNELS` channels and `AUTHORS` authors.
const MESSAGES: i64 = 20_000;
const CHANNELS: i64 = 100;
const AUTHORS: i64 = 500;
/// Community-wide rows (kinds 0 and 1), older than every message.
const WIDE: i64 = 200;

#[derive(Clone, Copy, Debug)]
enum Verb {
    Req,
    NegOpen,
    Count,
    /// NIP-77's kept set brought up to date: the rows appended since a point
    /// (`appended_stamps`, SQLite only), here the last 50.
    Appended,
}

/// Who reads: the anonymous reader (community-wide rows only), a member of every
/// channel, or a reader of more channels than the store names inline (SQLite's
/// `buzz_readable`, PostgreSQL's `probe_wide`).
#[derive(Clone, Copy, Debug)]
enum Reader {
    Anonymous,
    Member,
    MemberOfMany,
}

struct Shape {
    reader: Reader,
    verb: Verb,
    filter: Value,
    /// The index the plan must use.
    index: &'static str,
}

fn shapes() -> Vec<Shape> {
    let author = pubkey(3);
    let unknown = "f".repeat(64);
    let id = event_id(MESSAGES + 5);
    let ids: Vec<String> = (0..3).map(|i| event_id(i * 7)).collect();
    let at = base_time();
    let shape = |reader, verb, filter: Value, index| Shape {
        reader,
        verb,
        filter,
        index,
    };
    use Reader::{Anonymous as A, Member as M, MemberOfMany as MM};
    use Verb::{Count, NegOpen, Req};
    vec![
        shape(A, Req, json!({"limit": 1}), "events_wide"),
        shape(
            A,
            Req,
            json!({"authors": [unknown], "limit": 1}),
            "events_wide_by_author",
        ),
        shape(
            A,
            Req,
            json!({"authors": [author, unknown], "limit": 20}),
            "events_wide_by_author",
        ),
        shape(A, Req, json!({"kinds": [0], "limit": 1}), "events_by_kind"),
        shape(
            A,
            Req,
            json!({"kinds": [0, 1], "limit": 20}),
            "events_by_kind",
        ),
        shape(A, Req, json!({"ids": [id]}), "events_identity"),
        shape(
            A,
            Req,
            json!({"#t": ["topic1"], "limit": 20}),
            "event_tags_lookup",
        ),
        shape(
            A,
            Req,
            json!({"#t": ["topic1"], "kinds": [1], "limit": 20}),
            "event_tags_lookup",
        ),
        shape(A, NegOpen, json!({"#t": ["topic1"]}), "event_tags_lookup"),
        shape(
            A,
            Req,
            json!({"since": at - 100, "until": at - 10, "limit": 20}),
            "events_wide",
        ),
        shape(A, NegOpen, json!({}), "events_wide"),
        shape(A, Count, json!({}), "events_wide"),
        shape(A, Count, json!({"kinds": [1]}), "events_by_kind"),
        shape(M, Req, json!({"limit": 1}), "events_by_time"),
        shape(M, Req, json!({"kinds": [1], "limit": 1}), "events_by_kind"),
        shape(
            M,
            Req,
            json!({"kinds": [0, 1], "limit": 20}),
            "events_by_kind",
        ),
        shape(
            M,
            Req,
            json!({"authors": [unknown], "limit": 1}),
            "events_by_author",
        ),
        shape(M, Req, json!({"ids": ids}), "events_identity"),
        shape(
            M,
            Req,
            json!({"#t": ["topic1", "topic2"], "limit": 20}),
            "event_tags_lookup",
        ),
        shape(
            M,
            Req,
            json!({"#t": ["topic1"], "authors": [author], "limit": 20}),
            "event_tags_lookup",
        ),
        shape(
            M,
            Req,
            json!({"kinds": [9], "#h": [channel(3)], "limit": 20}),
            "events_by_channel",
        ),
        shape(
            M,
            Req,
            json!({"#h": [channel(3), channel(4)], "limit": 20}),
            "events_by_channel",
        ),
        shape(M, NegOpen, json!({"kinds": [1]}), "events_by_kind"),
        shape(
            M,
            Count,
            json!({"kinds": [9], "#h": [channel(3)]}),
            "events_by_channel",
        ),
        shape(MM, Req, json!({"limit": 1}), "events_by_time"),
        shape(
            MM,
            Req,
            json!({"#t": ["topic1"], "limit": 20}),
            "event_tags_lookup",
        ),
        shape(MM, Req, json!({"kinds": [1], "limit": 1}), "events_by_kind"),
        shape(
            MM,
            Req,
            json!({"authors": [author], "limit": 20}),
            "events_by_author",
        ),
        shape(
            MM,
            Req,
            json!({"kinds": [9], "#h": [channel(3)], "limit": 20}),
            "events_by_channel",
        ),
        shape(MM, Count, json!({"kinds": [1]}), "events_by_kind"),
    ]
}

/// SQLite: the appended rows are read by `seq` range, whoever reads and whatever the
/// filter (`#h` checked on each row), never down an index of the kept set's rows.
fn appended_shapes() -> Vec<Shape> {
    use Reader::{Anonymous as A, Member as M, MemberOfMany as MM};
    let range = "INTEGER PRIMARY KEY (rowid>? AND rowid<?)";
    [
        (A, json!({})),
        (M, json!({})),
        (M, json!({"kinds": [9], "#h": [channel(3)]})),
        (MM, json!({"authors": [pubkey(3)]})),
    ]
    .into_iter()
    .map(|(reader, filter)| Shape {
        reader,
        verb: Verb::Appended,
        filter,
        index: range,
    })
    .collect()
}

fn base_time() -> i64 {
    now() - 100_000
}

fn pubkey(n: i64) -> String {
    format!("{:064x}", 1_000_000 + n)
}

fn event_id(n: i64) -> String {
    format!("{n:064x}")
}

fn channel(n: i64) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

/// The rows, written as one statement each (the plans do not depend on signatures):
/// `n_messages` channel messages and `n_wide` community-wide rows, PostgreSQL's analysed
/// after when `analyse`.
fn seed_sql(
    backend: TestBackend,
    community: i64,
    n_messages: i64,
    n_wide: i64,
    analyse: bool,
) -> String {
    let at = base_time();
    let (series, hex, text) = match backend {
        TestBackend::Sqlite => (
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {last}) \
             SELECT i FROM n",
            "printf('%064x', {x})",
            "printf('%012x', {x})",
        ),
        TestBackend::Postgres => (
            "SELECT generate_series(0, {last}) AS i",
            "lpad(to_hex({x}), 64, '0')",
            "lpad(to_hex({x}), 12, '0')",
        ),
    };
    let series = |last: i64| series.replace("{last}", &last.to_string());
    let hex = |x: &str| hex.replace("{x}", x);
    let text = |x: &str| text.replace("{x}", x);
    let messages = format!(
        "INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, \
         received_at, channel_id) \
         SELECT {community}, {id}, {author}, {at} + i, 9, '[]', 'm', 's', i, \
         '00000000-0000-4000-8000-' || {channel} FROM ({series}) AS s;",
        id = hex("i"),
        author = hex(&format!("1000000 + i % {AUTHORS}")),
        channel = text(&format!("i % {CHANNELS}")),
        series = series(n_messages - 1),
    );
    let wide = format!(
        "INSERT INTO events (community_id, id, pubkey, created_at, kind, tags, content, sig, \
         received_at, channel_id) \
         SELECT {community}, {id}, {author}, {at} - 1000 + i, i % 2, '[]', 'n', 's', i, NULL \
         FROM ({series}) AS s;",
        id = hex(&format!("{n_messages} + i")),
        author = hex(&format!("1000000 + i % {AUTHORS}")),
        series = series(n_wide - 1),
    );
    let tags =
        "INSERT INTO event_tags (event_seq, position, community_id, name, value, created_at) \
         SELECT seq, 0, community_id, 'h', channel_id, created_at FROM events \
         WHERE channel_id IS NOT NULL; \
         INSERT INTO event_tags (event_seq, position, community_id, name, value, created_at) \
         SELECT seq, 0, community_id, 't', 'topic' || (seq % 5), created_at FROM events \
         WHERE kind = 1;";
    match backend {
        TestBackend::Postgres if analyse => format!("{messages}{wide}{tags} ANALYZE;"),
        _ => format!("{messages}{wide}{tags}"),
    }
}

fn scope(reader: Reader, community: i64) -> Scope {
    Scope {
        community_id: community,
        community_wide: true,
        channels: match reader {
            Reader::Anonymous => ChannelScope::None,
            Reader::Member => {
                ChannelScope::Only((0..CHANNELS).map(channel).collect::<ChannelSet>())
            }
            // Channels without rows besides the seeded ones: past the inline bound (200).
            Reader::MemberOfMany => {
                ChannelScope::Only((0..CHANNELS + 250).map(channel).collect::<ChannelSet>())
            }
        },
        expiry: HashMap::new(),
    }
}

/// Run one shape on a read thread, as the query service does.
async fn run(relay: &TestRelay, community: i64, shape: &Shape) -> Result<(), Reason> {
    let filter = Filter::parse(&shape.filter).expect("filter parses");
    let scope = scope(shape.reader, community);
    let verb = shape.verb;
    relay
        .running()
        .services
        .store
        .read(move |mut conn| {
            let at = now();
            match verb {
                Verb::Req => query_keys(&mut conn, &scope, &filter, 20, at).map(drop),
                Verb::NegOpen => query_stamps(&mut conn, &scope, &filter, 100_001, at).map(drop),
                Verb::Count => count_matching(&mut conn, &scope, &[filter], at, 10_000).map(drop),
                Verb::Appended => {
                    let Some(until) = append_point(&mut conn)? else {
                        return Ok(());
                    };
                    let since = AppendPoint::for_tests(0, until.last_seq() - 50);
                    let until = AppendPoint::for_tests(0, until.last_seq());
                    appended_stamps(&mut conn, &scope, &filter, since, until, 100, at).map(drop)
                }
            }
        })
        .await
}

#[derive(diesel::QueryableByName)]
struct SqlitePlanRow {
    #[diesel(sql_type = diesel::sql_types::Text)]
    detail: String,
}

#[derive(diesel::QueryableByName)]
struct PgPlanRow {
    #[diesel(sql_type = diesel::sql_types::Text, column_name = "QUERY PLAN")]
    line: String,
}

#[derive(diesel::QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}

/// The plan of one recorded statement (`SQL -- binds: [...]`), explained on a read
/// connection of the relay.
async fn plan(relay: &TestRelay, recorded: String) -> String {
    relay
        .running()
        .services
        .store
        .read(move |conn| {
            let (sql, binds) = recorded
                .split_once(" -- binds: ")
                .unwrap_or((recorded.as_str(), "[]"));
            let lines: Vec<String> = match conn {
                Conn::Sqlite(c) => diesel::sql_query(format!("EXPLAIN QUERY PLAN {sql}"))
                    .load::<SqlitePlanRow>(c)?
                    .into_iter()
                    .map(|r| r.detail)
                    .collect(),
                Conn::Pg(c) => {
                    c.batch_execute("DEALLOCATE ALL")?;
                    c.batch_execute(&format!("PREPARE shape AS {sql}"))?;
                    diesel::sql_query(format!("EXPLAIN EXECUTE shape{}", pg_values(binds)))
                        .load::<PgPlanRow>(c)?
                        .into_iter()
                        .map(|r| r.line)
                        .collect()
                }
            };
            Ok(lines.join("\n"))
        })
        .await
        .expect("explain")
}

/// diesel's `Debug` list of bound values as PostgreSQL literals: `(1, 'ab', ARRAY['c'])`.
fn pg_values(binds: &str) -> String {
    let mut out = String::new();
    let mut chars = binds.trim().chars().peekable();
    let mut depth = 0;
    while let Some(c) = chars.next() {
        match c {
            '[' if depth == 0 => {
                depth += 1;
                out.push('(');
            }
            ']' if depth == 1 => {
                depth -= 1;
                out.push(')');
            }
            '[' => {
                depth += 1;
                out.push_str("ARRAY[");
            }
            ']' => {
                depth -= 1;
                out.push(']');
            }
            '"' => {
                out.push('\'');
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(next) = chars.next() {
                                out.push(next);
                            }
                        }
                        '\'' => out.push_str("''"),
                        c => out.push(c),
                    }
                }
                out.push('\'');
            }
            c => out.push(c),
        }
    }
    out
}

/// SQLite: wait until the relay took its own sampled planner statistics (the checkpoint
/// thread does after commits; `events` and `event_tags` are pinned from the start, the
/// other tables' appear then).
async fn statistics_taken(relay: &TestRelay) {
    let started = Instant::now();
    loop {
        let taken = relay
            .running()
            .services
            .store
            .read(|mut conn| {
                let rows: Vec<Count> = buzz_core::with_conn!(&mut conn, |c| diesel::sql_query(
                    "SELECT COUNT(*) AS n FROM sqlite_stat1 \
                     WHERE tbl NOT IN ('events', 'event_tags')"
                )
                .load(c))
                .unwrap_or_default();
                Ok(rows.first().map_or(0, |r| r.n))
            })
            .await
            .expect("count");
        if taken > 0 {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "statistics were never taken"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Should the plan read in answer order and stop at the limit? A REQ or NEG-OPEN whose
/// lists hold one value each (and no tag but `#h`): its index is in answer order for it,
/// so a sort means every match was read first — on PostgreSQL before 17, what an
/// `= ANY` on an index's second column, or a second channel condition, did to a read of
/// one channel (issue 39: 120-170 ms at 300k events for 20 rows).
fn in_answer_order(shape: &Shape) -> bool {
    if matches!(shape.verb, Verb::Count) {
        return false;
    }
    let Some(fields) = shape.filter.as_object() else {
        return false;
    };
    // One tag other than `#h` is walked down the tag index newest first (`tag_walk.rs`),
    // on both backends.
    fields.iter().all(|(name, value)| match value {
        Value::Array(values) => values.len() == 1 && name != "ids",
        _ => true,
    })
}

/// Is the shape's filter read by walking a tag's index (`tag_walk.rs`)? A tag other than
/// `#h`, and no `#h` or `ids`.
fn walks_a_tag(shape: &Shape) -> bool {
    let Some(fields) = shape.filter.as_object() else {
        return false;
    };
    fields
        .keys()
        .any(|name| name.starts_with('#') && name != "#h")
        && !fields.contains_key("#h")
        && !fields.contains_key("ids")
}

/// PostgreSQL: is the plan the tag walk, whatever the statistics? The first table read
/// (the outermost side of every join, printed first) is `event_tags_lookup`, and
/// `events` is only ever reached by its primary key from a tag row — never a scan of
/// the community's rows joined to the tags, the plan that turned quadratic with stale
/// statistics (each tag row, or each event, against a whole index).
fn walks_the_tag_index(plan: &str) -> bool {
    let scans: Vec<&str> = plan
        .lines()
        .map(|line| line.trim_start().trim_start_matches("->").trim_start())
        .filter(|node| node.contains("Scan") && !node.starts_with("Subquery Scan"))
        .collect();
    let first_is_the_tag_index = scans
        .first()
        .is_some_and(|node| node.contains("using event_tags_lookup on event_tags "));
    let events_by_key = scans
        .iter()
        .filter(|node| node.contains(" on events ") || node.contains(" on events  ("))
        .all(|node| node.contains("using events_pkey"));
    first_is_the_tag_index && events_by_key && !plan.contains("Hash")
}

/// Does the plan read every match before answering? A sort of the whole result (SQLite
/// `USE TEMP B-TREE FOR ORDER BY`, a PostgreSQL `Sort` node). Sorting only the ties of
/// an index walked in `created_at` order by `id` (SQLite `FOR RIGHT PART OF ORDER BY`,
/// PostgreSQL `Incremental Sort`) still stops at the limit.
///
/// PostgreSQL's tag walk sorts the rows it stopped at (at most the limit and that
/// second's ties) by `id` above the walk's own `Limit`: a sort with a `Limit` below it is
/// bounded, not a read of every match.
fn sorts(plan: &str) -> bool {
    let lines: Vec<&str> = plan.lines().collect();
    let depth = |line: &str| line.len() - line.trim_start().len();
    let node = |line: &str| {
        line.trim_start()
            .trim_start_matches("->")
            .trim_start()
            .to_owned()
    };
    plan.contains("TEMP B-TREE FOR ORDER BY")
        || lines.iter().enumerate().any(|(i, line)| {
            if !node(line).starts_with("Sort  (") {
                return false;
            }
            let below = lines[i + 1..]
                .iter()
                .take_while(|next| depth(next) > depth(line));
            !below
                .map(|next| node(next))
                .any(|n| n.starts_with("Limit  ("))
        })
}

/// Statements are recorded process-wide, so this file's tests take turns.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
static RECORDING: std::sync::Once = std::sync::Once::new();

/// The plans of `shapes` on `relay` that miss their index, walk the time index, scan a
/// table, read every match before answering or (a walked tag on PostgreSQL) leave the
/// tag walk, each written out with its statement and plan.
async fn wrong_plans(
    relay: &TestRelay,
    community: i64,
    backend: TestBackend,
    shapes: Vec<Shape>,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for shape in shapes {
        start_recording();
        run(relay, community, &shape)
            .await
            .unwrap_or_else(|e| panic!("{backend:?} {:?}: {e}", shape.filter));
        let recorded = stop_recording();
        let statements: Vec<String> = recorded
            .with_binds()
            .iter()
            .filter(|sql| {
                // `FROM (events INNER JOIN event_tags …)` for a walked tag on SQLite,
                // `… LATERAL (SELECT * FROM "events" …` on PostgreSQL.
                [
                    "FROM `events`",
                    "FROM \"events\"",
                    "FROM (`events`",
                    "FROM (\"events\"",
                ]
                .iter()
                .any(|from| sql.contains(from))
            })
            .cloned()
            .collect();
        assert!(!statements.is_empty(), "{backend:?}: nothing recorded");
        for statement in statements {
            let plan = plan(relay, statement.clone()).await;
            let walks_time = shape.index != "events_by_time" && plan.contains("events_by_time");
            // A whole table read, or (PostgreSQL) the `#h` check made a hash of every
            // `h` tag of the channel before the first row.
            let scans = plan.contains("SCAN events")
                || plan.contains("Seq Scan on events")
                || plan.contains("Seq Scan on event_tags")
                || plan.contains("hashed SubPlan");
            let sorts = in_answer_order(&shape) && sorts(&plan);
            let off_the_walk = matches!(backend, TestBackend::Postgres)
                && walks_a_tag(&shape)
                && !walks_the_tag_index(&plan);
            if !plan.contains(shape.index) || walks_time || scans || sorts || off_the_walk {
                wrong.push(format!(
                    "{:?} {:?} {} wants {}:\n  {statement}\n  {}",
                    shape.reader,
                    shape.verb,
                    shape.filter,
                    shape.index,
                    plan.replace('\n', "\n  ")
                ));
            }
        }
    }
    wrong
}

/// One test for both backends, one after the other: the recording is process-wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_shape_is_served_by_its_index() {
    let _turn = SERIAL.lock().await;
    RECORDING.call_once(|| record_statements_of(READ_THREAD));
    for backend in [TestBackend::Sqlite, TestBackend::Postgres] {
        let Some(relay) = TestRelay::start(backend, "read_plans").await else {
            continue;
        };
        let community = relay.running().services.communities[0].id;
        let sql = seed_sql(backend, community, MESSAGES, WIDE, true);
        relay
            .running()
            .services
            .store
            .write(move |conn| {
                buzz_core::with_conn!(conn, |c| c.batch_execute(&sql))?;
                Ok(())
            })
            .await
            .expect("seed");
        if matches!(backend, TestBackend::Sqlite) {
            statistics_taken(&relay).await;
        }
        let mut all = shapes();
        if matches!(backend, TestBackend::Sqlite) {
            all.extend(appended_shapes());
        }
        let wrong = wrong_plans(&relay, community, backend, all).await;
        assert!(
            wrong.is_empty(),
            "{backend:?}: shapes off their index:\n{}",
            wrong.join("\n")
        );
        relay.stop().await;
    }
}

/// PostgreSQL, the hostile case: `events` and `event_tags` never analysed (autovacuum
/// off or not yet round), then filled with a few thousand rows the planner knows
/// nothing about. Statistics like these turned the old tag join around — each tag row
/// joined to a scan of the community's `events_wide` — into 8 s statement timeouts in
/// `core/tests/live_stored_race.rs`; the walk's statement must not depend on them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walked_tag_stays_walked_without_statistics() {
    let _turn = SERIAL.lock().await;
    RECORDING.call_once(|| record_statements_of(READ_THREAD));
    let backend = TestBackend::Postgres;
    let Some(relay) = TestRelay::start(backend, "read_plans_unanalysed").await else {
        return;
    };
    let community = relay.running().services.communities[0].id;
    let sql = format!(
        "ALTER TABLE events SET (autovacuum_enabled = false); \
         ALTER TABLE event_tags SET (autovacuum_enabled = false); {}",
        seed_sql(backend, community, 3_000, 2_000, false)
    );
    relay
        .running()
        .services
        .store
        .write(move |conn| {
            buzz_core::with_conn!(conn, |c| c.batch_execute(&sql))?;
            Ok(())
        })
        .await
        .expect("seed");
    let analysed: Vec<Count> = relay
        .running()
        .services
        .store
        .read(|mut conn| {
            Ok(buzz_core::with_conn!(&mut conn, |c| diesel::sql_query(
                "SELECT COUNT(*) AS n FROM pg_stats WHERE tablename IN ('events', 'event_tags')"
            )
            .load(c))?)
        })
        .await
        .expect("statistics");
    assert_eq!(analysed.first().map(|r| r.n), Some(0), "never analysed");
    let walked: Vec<Shape> = shapes().into_iter().filter(walks_a_tag).collect();
    assert!(!walked.is_empty());
    let wrong = wrong_plans(&relay, community, backend, walked).await;
    assert!(
        wrong.is_empty(),
        "unanalysed: tag shapes off the walk:\n{}",
        wrong.join("\n")
    );
    relay.stop().await;
}
