//! The Overview's charts on a ratatui `TestBackend`, from a scripted series of scrapes
//! fed through the real figures and history code (`Live::from`, `Process::record`): two
//! processes scraped every 2 s for two minutes, refusing with two NIP-01 prefixes (labelled bare, as
//! `buzz_errors_total{prefix}` is), the
//! second one stopping to answer for the last 20 s.

use buzz_admin::data::figures::{Figures, Live};
use buzz_admin::data::history::{series, Metric, Series, WINDOW};
use buzz_admin::data::{Process, Snapshot};
use buzz_admin::ui::App;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const A: &str = "10.0.0.1:7778";
const B: &str = "10.0.0.2:7778";
/// Scrapes in the script, 2 s apart; B fails the last `B_DOWN` of them.
const STEPS: u32 = 60;
const B_DOWN: u32 = 10;
const BARS: &[char] = &['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// What one process adds per 2 s step to its counters.
struct Per {
    events: f64,
    queries: f64,
    connections: f64,
    errors: &'static [(&'static str, f64)],
    /// Ingest latencies observed per step: counts at or below 1 ms, 10 ms, 100 ms.
    ingest: [f64; 3],
}

/// A process's cumulative counters as its `/metrics` would give them after `n` steps.
fn figures(per: &Per, n: f64) -> Figures {
    let bounds = [0.001, 0.01, 0.1, f64::INFINITY];
    let mut cumulative = 0.0;
    let ingest_buckets = bounds
        .iter()
        .enumerate()
        .map(|(i, le)| {
            cumulative += per.ingest.get(i).copied().unwrap_or(0.0);
            (*le, cumulative * n)
        })
        .collect();
    Figures {
        connections: per.connections,
        events_in: per.events * n,
        queries: per.queries * n,
        ingest_buckets,
        query_buckets: bounds.iter().map(|le| (*le, 0.0)).collect(),
        errors: per
            .errors
            .iter()
            .map(|(p, k)| (p.to_string(), k * n))
            .collect::<BTreeMap<_, _>>(),
        ..Figures::default()
    }
}

/// A: 10 ev/s, 5 q/s, 3 connections, 1/s `invalid:`, ingest p99 10 ms.
const PER_A: Per = Per {
    events: 20.0,
    queries: 10.0,
    connections: 3.0,
    errors: &[("invalid", 2.0)],
    ingest: [90.0, 10.0, 0.0],
};
/// B: 20 ev/s, 2 q/s, 5 connections, 0.5/s `invalid:` and 2/s `blocked:`, ingest p99
/// 100 ms (merged with A's the relay's p99 is 10 ms: quantiles do not add).
const PER_B: Per = Per {
    events: 40.0,
    queries: 4.0,
    connections: 5.0,
    errors: &[("invalid", 1.0), ("blocked", 4.0)],
    ingest: [98.0, 0.0, 2.0],
};

fn scripted() -> Snapshot {
    let t0 = Instant::now();
    let mut a = Process::new(A);
    let mut b = Process::new(B);
    let mut previous: [Option<(Figures, Instant)>; 2] = [None, None];
    for step in 0..STEPS {
        let at = t0 + Duration::from_secs(2 * u64::from(step));
        for (i, (process, per)) in [(&mut a, &PER_A), (&mut b, &PER_B)].into_iter().enumerate() {
            // B stops answering for the last scrapes (its counters move on unseen).
            if i == 1 && step >= STEPS - B_DOWN {
                process.record(at, Err(format!("{B}: connection refused")));
                continue;
            }
            let f = figures(per, f64::from(step));
            let live = Live::from(f.clone(), at, previous[i].as_ref());
            previous[i] = Some((f, at));
            process.record(at, Ok(live));
        }
    }
    Snapshot {
        processes: vec![a, b],
        ..Snapshot::default()
    }
}

fn screen(terminal: &Terminal<TestBackend>) -> String {
    let buf = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

fn draw(app: &mut App, snapshot: &Snapshot, width: u16, height: u16) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
    terminal
        .draw(|frame| app.draw(frame, snapshot))
        .expect("draws");
    screen(&terminal)
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// The inside of the bordered panel whose heading holds `title`, row by row.
fn panel(text: &str, title: &str) -> Vec<String> {
    let lines: Vec<Vec<char>> = text.lines().map(|l| l.chars().collect()).collect();
    let y = text
        .lines()
        .position(|l| l.contains(title))
        .unwrap_or_else(|| panic!("no {title:?} in\n{text}"));
    let heading: String = lines[y].iter().collect();
    let at = heading[..heading.find(title).expect("found")]
        .chars()
        .count();
    let left = lines[y][..at]
        .iter()
        .rposition(|c| *c == '┌')
        .expect("panel corner");
    let right = at
        + lines[y][at..]
            .iter()
            .position(|c| *c == '┐')
            .expect("panel corner");
    lines[y + 1..]
        .iter()
        .take_while(|l| l[left] == '│')
        .map(|l| l[left + 1..right].iter().collect())
        .collect()
}

/// The line holding `title` (a chart's panel heading).
fn line_with<'t>(text: &'t str, title: &str) -> &'t str {
    text.lines()
        .find(|l| l.contains(title))
        .unwrap_or_else(|| panic!("no {title:?} in\n{text}"))
}

#[test]
fn the_sum_is_the_processes_added_and_a_stale_one_is_a_gap() {
    let snapshot = scripted();
    let (a, b) = (
        &snapshot.processes[0].history,
        &snapshot.processes[1].history,
    );
    let end = a.newest().expect("scraped");
    let columns = 150;
    let at = |h: &[&_], m: &Metric| series(h, m, end, WINDOW, columns);
    for metric in [
        Metric::Events,
        Metric::Queries,
        Metric::Connections,
        Metric::Errors(Some("invalid".into())),
        Metric::Errors(Some("blocked".into())),
    ] {
        let (all, one, two): (Series, Series, Series) =
            (at(&[a, b], &metric), at(&[a], &metric), at(&[b], &metric));
        let (mut both, mut gaps) = (0, 0);
        for c in 0..columns {
            let (s, x, y) = (all.points[c], one.points[c], two.points[c]);
            match (x.value, y.value) {
                (Some(x), Some(y)) => {
                    both += 1;
                    assert!(!s.stale, "{metric:?} column {c}");
                    assert!(
                        (s.value.expect("summed") - (x + y)).abs() < 1e-9,
                        "{metric:?} {c}"
                    );
                }
                (Some(x), None) if y.stale => {
                    // B's gap: the sum is A's alone and says it misses one.
                    gaps += 1;
                    assert_eq!(s.value, Some(x), "{metric:?} column {c}");
                    assert!(s.stale, "{metric:?} column {c}");
                }
                (None, None) => assert_eq!(s.value, None, "{metric:?} column {c}"),
                other => panic!("{metric:?} column {c}: {other:?}"),
            }
        }
        // The script covers 2 of the 5 minutes: 60 columns, B missing from the last 10.
        assert!(
            (48..=50).contains(&both),
            "{metric:?}: {both} columns with both"
        );
        assert!((9..=11).contains(&gaps), "{metric:?}: {gaps} gap columns");
        // B's own chart: its last columns are stale gaps, not values.
        assert!(two.points[columns - 5..]
            .iter()
            .all(|p| p.stale && p.value.is_none()));
        assert_eq!(two.stale, 1);
        assert_eq!(two.latest, None);
        assert_eq!(all.latest, one.latest, "{metric:?}: now = A's, B is stale");
    }
    // The rates are what the script put in (per second, from counters per 2 s).
    let events = at(&[a], &Metric::Events);
    assert_eq!(events.latest, Some(10.0));
    assert_eq!(at(&[b], &Metric::Events).points[100].value, Some(20.0));
    assert_eq!(at(&[a, b], &Metric::Events).points[100].value, Some(30.0));
    assert_eq!(
        at(&[b], &Metric::Errors(Some("blocked".into()))).points[100].value,
        Some(2.0)
    );
    // Latencies merge: A 10 ms, B 100 ms, the two together 10 ms.
    let p99 = |h: &[&_]| at(h, &Metric::IngestP99).points[100].value;
    assert_eq!(p99(&[a]), Some(0.01));
    assert_eq!(p99(&[b]), Some(0.1));
    assert_eq!(p99(&[a, b]), Some(0.01));
    // Before the first scrape: nothing, neither a value nor a gap.
    assert_eq!(events.points[0].value, None);
    assert!(!events.points[0].stale);
}

#[test]
fn the_overview_charts_all_processes_and_each_one() {
    let snapshot = scripted();
    let mut app = App::new(None);
    let text = draw(&mut app, &snapshot, 160, 48);
    assert!(text.contains("Last 5 min · all processes"), "{text}");
    assert!(
        text.contains("STALE: 1 of 2 processes not answering"),
        "{text}"
    );
    for title in [
        "ingest events/s · now 10.0 · max 30.0",
        "queries/s · now 5.0 · max 7.0",
        "connections · now 3 · max 8",
        "errors/s blocked: · now 0.0 · max 2.0",
        "errors/s invalid: · now 1.0 · max 1.5",
        "ingest p99 · now 10ms · max 10ms",
        "query p99 · now - · max -",
    ] {
        line_with(&text, title);
    }
    // The table's first row sums the processes that answer.
    assert!(line_with(&text, "all (1 STALE)").contains(" 3 "), "{text}");
    // Bars are drawn, scrolled to the right edge (the newest column), and where B was
    // stale the sum is A's alone (a third of the height), not a gap.
    let events = panel(&text, "ingest events/s · now");
    assert_eq!(events.len(), 6, "{events:?}");
    let bottom: Vec<char> = events[5].chars().collect();
    assert!(
        bottom.iter().filter(|c| BARS.contains(c)).count() >= 25,
        "{events:?}"
    );
    assert!(BARS.contains(bottom.last().expect("a row")), "{events:?}");
    assert!(events.iter().all(|row| !row.contains('░')), "{events:?}");
    assert!(
        events[0].ends_with("     ") && events[0].contains('█'),
        "{events:?}"
    );

    // ↓ picks A: its own figures.
    app.handle_key(key(KeyCode::Down), &snapshot);
    let text = draw(&mut app, &snapshot, 160, 48);
    assert!(text.contains(&format!("Last 5 min · {A}")), "{text}");
    line_with(&text, "ingest events/s · now 10.0 · max 10.0");
    line_with(&text, "errors/s invalid: · now 1.0 · max 1.0 · total 118");
    assert!(
        !text.contains("errors/s blocked:"),
        "A never refused so:\n{text}"
    );

    // ↓ again picks B: stale, its last 20 s a gap.
    app.handle_key(key(KeyCode::Down), &snapshot);
    let text = draw(&mut app, &snapshot, 160, 48);
    assert!(text.contains(&format!("Last 5 min · {B}")), "{text}");
    assert!(
        text.contains("STALE: 10.0.0.2:7778: connection refused"),
        "{text}"
    );
    line_with(&text, "ingest events/s · now STALE · max 20.0");
    line_with(&text, "ingest p99 · now STALE · max 100ms");
    for row in panel(&text, "ingest events/s · now") {
        assert!(row.ends_with("░░░░░") && row.contains('█'), "{row}");
    }
}

#[test]
fn the_charts_fit_any_terminal() {
    let snapshot = scripted();
    let mut app = App::new(None);
    // 80×24 (the size every pane fits): one line per chart, all seven.
    let text = draw(&mut app, &snapshot, 80, 24);
    for title in [
        "ingest events/s 10.0",
        "connections 3",
        "errors/s blocked: 0.0",
        "query p99 -",
    ] {
        line_with(&text, title);
    }
    assert!(text.contains("q quit"), "{text}");
    // 200×60: two columns of panels, every chart.
    let text = draw(&mut app, &snapshot, 200, 60);
    for title in [
        "ingest events/s · now",
        "errors/s invalid: · now",
        "query p99 · now",
    ] {
        line_with(&text, title);
    }
    // 40×20: the first charts and how many are folded away.
    let text = draw(&mut app, &snapshot, 40, 20);
    line_with(&text, "ingest events/s 10.0");
    line_with(&text, "+4 more charts");
    // 40×12: the relay block gives way, the table stays whole, one chart is left.
    let text = draw(&mut app, &snapshot, 40, 12);
    line_with(&text, "ingest events/s 10.0");
    line_with(&text, B);
    assert!(!text.contains("Relay"), "{text}");
    // Even smaller, and a snapshot with no scrape yet.
    for (w, h) in [(10, 4), (1, 1), (20, 30)] {
        draw(&mut app, &snapshot, w, h);
    }
    let text = draw(&mut App::new(None), &Snapshot::default(), 80, 24);
    assert!(text.contains("waiting for the first scrape"), "{text}");
}
