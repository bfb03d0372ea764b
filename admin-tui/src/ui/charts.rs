//! The Overview's charts: the last minutes of ingest events/s, queries/s, connections,
//! errors/s (one chart per NIP-01 prefix refused in that time) and ingest and query p99,
//! for every process summed or for the one picked in the table, as sparklines one column
//! wide per slice of time, so they use the width they get and scroll as scrapes arrive.
//!
//! Sizing: two columns of charts from 120 cells wide; bordered panels when each gets
//! four rows, one line per chart below that, and on a terminal too short for every
//! chart the first ones and a line saying how many are folded away. A column a failed
//! scrape covers is `░` (red); a sum that misses a stale process is drawn yellow.

use super::titled;
use crate::data::figures::latency;
use crate::data::history::{self, Metric, Point, Series, WINDOW};
use crate::data::Snapshot;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Sparkline, SparklineBar};
use ratatui::Frame;

/// Width from which charts sit in two columns.
const TWO_COLUMNS: u16 = 120;
/// Rows a chart needs to be drawn as a bordered panel (border, two bar rows, border).
const PANEL_ROWS: u16 = 4;
/// Widest label of a one-line chart.
const LABEL: u16 = 28;
/// Values are drawn as integers: micro-units keep sub-millisecond latencies apart.
const SCALE: f64 = 1e6;

/// The charts shown for these processes' histories, in order.
pub(crate) fn metrics(histories: &[&history::History]) -> Vec<Metric> {
    let mut metrics = vec![Metric::Events, Metric::Queries, Metric::Connections];
    let prefixes = history::prefixes(histories);
    if prefixes.is_empty() {
        metrics.push(Metric::Errors(None));
    }
    metrics.extend(prefixes.into_iter().map(|p| Metric::Errors(Some(p))));
    metrics.extend([Metric::IngestP99, Metric::QueryP99]);
    metrics
}

/// A value as the chart's label shows it.
pub(crate) fn value_text(metric: &Metric, value: Option<f64>) -> String {
    match value {
        None => "-".into(),
        Some(v) if metric.is_latency() => latency(Some(v)),
        Some(v) if *metric == Metric::Connections => format!("{v:.0}"),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
    }
}

/// Draw the charts of `scope` (`None`: every process summed; `Some(i)`: process `i`).
pub(super) fn draw(frame: &mut Frame, area: Rect, snapshot: &Snapshot, scope: Option<usize>) {
    let all: Vec<&history::History> = snapshot.processes.iter().map(|p| &p.history).collect();
    let (name, histories, cause) = match scope.and_then(|i| snapshot.processes.get(i)) {
        Some(p) => (p.addr.clone(), vec![&p.history], p.live.error.clone()),
        None => {
            let stale = snapshot
                .processes
                .iter()
                .filter(|p| p.live.is_stale())
                .count();
            let cause = (stale > 0).then(|| {
                format!(
                    "{stale} of {} processes not answering",
                    snapshot.processes.len()
                )
            });
            ("all processes".to_owned(), all.clone(), cause)
        }
    };
    let block = titled(
        &format!("Last {} min · {name}", WINDOW.as_secs() / 60),
        cause.as_ref(),
    );
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(end) = history::newest(&all) else {
        frame.render_widget(Paragraph::new("waiting for the first scrape"), inner);
        return;
    };
    if inner.width < 4 || inner.height == 0 {
        return;
    }
    let metrics = metrics(&histories);
    let cols: usize = if inner.width >= TWO_COLUMNS { 2 } else { 1 };
    let rows_needed = metrics.len().div_ceil(cols);
    let height = usize::from(inner.height);
    // Too short for all: the first charts and a line for the rest.
    let (shown, note) = if height >= rows_needed {
        (metrics.len(), None)
    } else if height >= 2 {
        let shown = (height - 1) * cols;
        (shown, Some(metrics.len() - shown))
    } else {
        (cols.min(metrics.len()), None)
    };
    let rows = shown.div_ceil(cols);
    let [charts, rest] = Layout::vertical([
        Constraint::Length(inner.height - u16::from(note.is_some())),
        Constraint::Min(0),
    ])
    .areas(inner);
    if let Some(folded) = note {
        frame.render_widget(
            Paragraph::new(format!(
                "+{folded} more charts: a taller terminal shows them"
            ))
            .style(Style::new().fg(Color::DarkGray)),
            rest,
        );
    }
    // Every chart as tall as the others; what does not divide stays blank below.
    let row_height = charts.height / rows.max(1) as u16;
    let mut heights = vec![Constraint::Length(row_height); rows];
    heights.push(Constraint::Min(0));
    let row_areas = Layout::vertical(heights).split(charts);
    for (r, row) in row_areas.iter().take(rows).enumerate() {
        let cells = Layout::horizontal(vec![Constraint::Fill(1); cols]).split(*row);
        for (c, cell) in cells.iter().enumerate() {
            if let Some(metric) = metrics.get(r * cols + c).filter(|_| r * cols + c < shown) {
                chart(frame, *cell, metric, &histories, end, snapshot, scope);
            }
        }
    }
}

/// One chart in `area`: a bordered panel when tall enough, else a labelled line.
fn chart(
    frame: &mut Frame,
    area: Rect,
    metric: &Metric,
    histories: &[&history::History],
    end: std::time::Instant,
    snapshot: &Snapshot,
    scope: Option<usize>,
) {
    let title = metric.title();
    let color = match metric {
        Metric::Errors(_) => Color::Red,
        Metric::IngestP99 | Metric::QueryP99 => Color::Magenta,
        Metric::Connections => Color::Cyan,
        _ => Color::Green,
    };
    let now = |series: &Series| {
        if series.latest.is_none() && series.stale > 0 && histories.len() == 1 {
            "STALE".to_owned()
        } else {
            value_text(metric, series.latest)
        }
    };
    if area.height >= PANEL_ROWS {
        let block = Block::bordered().border_style(Style::new().fg(Color::DarkGray));
        let bars = block.inner(area);
        let series = history::series(histories, metric, end, WINDOW, usize::from(bars.width));
        let mut heading = format!(
            " {title} · now {} · max {} ",
            now(&series),
            value_text(metric, series.max())
        );
        if let Some(total) = error_total(metric, snapshot, scope) {
            heading.push_str(&format!("· total {total} "));
        }
        frame.render_widget(block.title(Span::styled(heading, bold())), area);
        frame.render_widget(sparkline(&series, color), bars);
        return;
    }
    let label = LABEL.min(area.width * 3 / 5);
    let [text, bars] =
        Layout::horizontal([Constraint::Length(label), Constraint::Min(0)]).areas(area);
    let series = history::series(histories, metric, end, WINDOW, usize::from(bars.width));
    let lines = if area.height >= 2 {
        vec![
            Line::from(Span::styled(title, bold())),
            Line::from(format!(
                "now {} max {}",
                now(&series),
                value_text(metric, series.max())
            )),
        ]
    } else {
        vec![Line::from(vec![
            Span::styled(title, bold()),
            Span::raw(format!(" {}", now(&series))),
        ])]
    };
    frame.render_widget(Paragraph::new(lines), text);
    frame.render_widget(sparkline(&series, color), bars);
}

/// Refusals with this chart's prefix since each process started (`None`: not an
/// error chart, or no figures yet).
fn error_total(metric: &Metric, snapshot: &Snapshot, scope: Option<usize>) -> Option<f64> {
    let Metric::Errors(prefix) = metric else {
        return None;
    };
    let lives = snapshot
        .processes
        .iter()
        .enumerate()
        .filter(|(i, _)| scope.is_none_or(|s| s == *i))
        .filter_map(|(_, p)| p.live.value.as_ref());
    let mut total = None;
    for l in lives {
        let n: f64 = match prefix {
            Some(p) => l.figures.errors.get(p).copied().unwrap_or(0.0),
            None => l.figures.errors.values().sum(),
        };
        total = Some(total.unwrap_or(0.0) + n);
    }
    total
}

fn sparkline(series: &Series, color: Color) -> Sparkline<'static> {
    let bars: Vec<SparklineBar> = series.points.iter().map(bar).collect();
    let max = series.max().map_or(0, |m| (m * SCALE).round() as u64);
    Sparkline::default()
        .data(bars)
        .max(max.max(1))
        .style(Style::new().fg(color))
        .absent_value_symbol("░")
        .absent_value_style(Style::new().fg(Color::Red))
}

fn bar(point: &Point) -> SparklineBar {
    match (point.value, point.stale) {
        // No scrape covers it: nothing drawn.
        (None, false) => SparklineBar::from(0),
        // A failed scrape covers it: the gap marker.
        (None, true) => SparklineBar::from(None),
        (Some(v), stale) => {
            let height = if v.is_finite() {
                (v.max(0.0) * SCALE).round() as u64
            } else {
                0
            };
            let bar = SparklineBar::from(height);
            if stale {
                bar.style(Some(Style::new().fg(Color::Yellow)))
            } else {
                bar
            }
        }
    }
}

fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}
