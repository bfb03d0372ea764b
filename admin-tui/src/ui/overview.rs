//! Overview: relay key, communities, and per relay process the live figures —
//! connections, events/s in, queries/s, writer queue, ingest and query p50/p99, errors
//! by prefix — with a stale marker on a process that stopped answering.

use super::{titled, Component, Filter};
use crate::data::figures::latency;
use crate::data::Snapshot;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::Frame;
use std::collections::BTreeMap;

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
        self.filter.navigate(&key, snapshot.processes.len());
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
        let [relay, processes, errors] = Layout::vertical([
            Constraint::Length(relay_rows + 2),
            Constraint::Min(4),
            Constraint::Length(3),
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
        frame.render_widget(
            Paragraph::new(lines).block(titled(
                &format!("Relay{}", self.filter.label()),
                snapshot.db.error.as_ref(),
            )),
            relay,
        );

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
        let selected = self.filter.clamp(snapshot.processes.len());
        let rows = snapshot.processes.iter().enumerate().map(|(i, p)| {
            let mut row = match &p.live.value {
                None => vec![
                    p.addr.clone(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ],
                Some(l) => vec![
                    p.addr.clone(),
                    format!("{}", l.figures.connections),
                    format!("{:.1}", l.events_per_sec),
                    format!("{:.1}", l.queries_per_sec),
                    format!("{}", l.figures.writer_queue),
                    format!("{}/{}", latency(l.ingest_p50), latency(l.ingest_p99)),
                    format!("{}/{}", latency(l.query_p50), latency(l.query_p99)),
                ],
            };
            let mut style = Style::new();
            if p.live.is_stale() {
                row[0] = format!("{} STALE", p.addr);
                style = style.fg(Color::Red);
            }
            if i == selected {
                style = style.add_modifier(Modifier::REVERSED);
            }
            Row::new(row).style(style)
        });
        let table = Table::new(
            rows,
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

        // Errors by prefix, summed over the processes; the selected one's stale cause.
        let mut by_prefix: BTreeMap<String, f64> = BTreeMap::new();
        for p in &snapshot.processes {
            if let Some(l) = &p.live.value {
                for (prefix, n) in &l.figures.errors {
                    *by_prefix.entry(prefix.clone()).or_default() += n;
                }
            }
        }
        let text = if by_prefix.is_empty() {
            "none".to_owned()
        } else {
            by_prefix
                .iter()
                .map(|(p, n)| format!("{p} {n}"))
                .collect::<Vec<_>>()
                .join(" · ")
        };
        let cause = snapshot
            .processes
            .get(selected)
            .and_then(|p| p.live.error.clone());
        frame.render_widget(
            Paragraph::new(text).block(titled("Errors by prefix", cause.as_ref())),
            errors,
        );
    }
}

fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}
