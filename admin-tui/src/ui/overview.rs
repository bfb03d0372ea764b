//! Overview: relay key, communities, per relay process the live figures — connections,
//! events/s in, queries/s, writer queue, ingest and query p50/p99 — with a first row
//! summing them and a stale marker on a process that stopped answering; below, the
//! charts of the last minutes (`charts.rs`) for the row picked with ↑↓ ("all" or one
//! process).

use super::{charts, titled, Component, Filter};
use crate::data::figures::{latency, Live};
use crate::data::Snapshot;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::Frame;

#[derive(Default)]
pub(super) struct Overview {
    filter: Filter,
}

impl Component for Overview {
    fn title(&self) -> &'static str {
        "Overview"
    }

    fn filter(&mut self) -> &mut Filter {
        &mut self.filter
    }

    fn handle_key(&mut self, key: KeyEvent, snapshot: &Snapshot) -> Option<super::Action> {
        // Row 0 is "all", then one row per process.
        self.filter.navigate(&key, snapshot.processes.len() + 1);
        None
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, snapshot: &Snapshot) {
        let db = snapshot.db.value.as_ref();
        let communities: Vec<Vec<String>> = db
            .map(|d| {
                d.report
                    .communities
                    .iter()
                    .map(|c| {
                        vec![
                            c.host.clone(),
                            c.name.clone(),
                            format!("{} events", c.events),
                            format!("{} channels", c.channels),
                        ]
                    })
                    .collect()
            })
            .unwrap_or_default();
        let communities = self.filter.apply(communities);
        let relay_rows = 2 + communities.len().max(1) as u16;
        let (relay_height, table_height) = heights(
            area.height,
            relay_rows + 2,
            snapshot.processes.len() as u16 + 4,
        );
        let [relay, processes, charts_area] = Layout::vertical([
            Constraint::Length(relay_height),
            Constraint::Length(table_height),
            Constraint::Min(0),
        ])
        .areas(area);

        let mut lines = Vec::new();
        let key = db
            .and_then(|d| d.report.relay_identity.clone())
            .unwrap_or_else(|| "(not recorded yet)".into());
        lines.push(Line::from(vec![
            Span::styled("key ", bold()),
            Span::raw(key),
        ]));
        let database = db.map(|d| d.report.database.clone()).unwrap_or_default();
        lines.push(Line::from(vec![
            Span::styled("db  ", bold()),
            Span::raw(database),
        ]));
        if communities.is_empty() {
            lines.push(Line::from("    (no community stored yet)"));
        }
        for c in &communities {
            lines.push(Line::from(format!(
                "    {:<20} {:<14} {:>14} {:>12}",
                c[0], c[1], c[2], c[3]
            )));
        }
        if relay.height > 0 {
            frame.render_widget(
                Paragraph::new(lines).block(titled(
                    &format!("Relay{}", self.filter.label()),
                    snapshot.db.error.as_ref(),
                )),
                relay,
            );
        }

        let header = Row::new(vec![
            "process",
            "conns",
            "ev/s",
            "q/s",
            "queue",
            "ingest p50/99",
            "query p50/99",
        ])
        .style(bold());
        let selected = self.filter.clamp(snapshot.processes.len() + 1);
        let row = |name: String, live: Option<&Live>| match live {
            None => vec![
                name,
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ],
            Some(l) => vec![
                name,
                format!("{}", l.figures.connections),
                format!("{:.1}", l.events_per_sec),
                format!("{:.1}", l.queries_per_sec),
                format!("{}", l.figures.writer_queue),
                format!("{}/{}", latency(l.ingest_p50), latency(l.ingest_p99)),
                format!("{}/{}", latency(l.query_p50), latency(l.query_p99)),
            ],
        };
        // The sum over the processes that answer now (a stale one's old figures would
        // be counted as current).
        let stale = snapshot
            .processes
            .iter()
            .filter(|p| p.live.is_stale())
            .count();
        let total = Live::sum(
            snapshot
                .processes
                .iter()
                .filter(|p| !p.live.is_stale())
                .filter_map(|p| p.live.value.as_ref()),
        );
        let name = if stale > 0 {
            format!("all ({stale} STALE)")
        } else {
            "all".to_owned()
        };
        let mut style = bold();
        if selected == 0 {
            style = style.add_modifier(Modifier::REVERSED);
        }
        let all = Row::new(row(name, total.as_ref())).style(style);
        let rows = snapshot.processes.iter().enumerate().map(|(i, p)| {
            let mut row = row(p.addr.clone(), p.live.value.as_ref());
            let mut style = Style::new();
            if p.live.is_stale() {
                row[0] = format!("{} STALE", p.addr);
                style = style.fg(Color::Red);
            }
            if i + 1 == selected {
                style = style.add_modifier(Modifier::REVERSED);
            }
            Row::new(row).style(style)
        });
        let table = Table::new(
            std::iter::once(all).chain(rows),
            [
                Constraint::Min(16),
                Constraint::Length(5),
                Constraint::Length(6),
                Constraint::Length(6),
                Constraint::Length(5),
                Constraint::Length(13),
                Constraint::Length(13),
            ],
        )
        .header(header)
        .block(titled("Processes (live, /metrics)", None));
        frame.render_widget(table, processes);

        charts::draw(frame, charts_area, snapshot, selected.checked_sub(1));
    }
}

/// Rows of the relay block and the process table out of `height`, the charts taking the
/// rest: on a short terminal the relay block goes first, then the table shrinks, so
/// one line of charts stays (its border and one chart).
fn heights(height: u16, relay: u16, table: u16) -> (u16, u16) {
    const CHARTS: u16 = 3;
    if height >= relay + table + CHARTS {
        (relay, table)
    } else {
        (0, table.min(height.saturating_sub(CHARTS)))
    }
}

fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}
