//! Captures (snapshot plugin): every active NIP-AR capture — reader, community, query,
//! age, time left, pages served, entries, bytes charged — and the shared quota in use
//! (captures and bytes), from Redis or the database, whichever the relay uses. Leases
//! (captures being taken) are listed too.

use super::{titled, Action, Component, Filter};
use crate::data::Snapshot;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::Frame;

#[derive(Default)]
pub(super) struct CapturesPane {
    filter: Filter,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn secs(ms: i64) -> String {
    format!("{}s", ms.div_euclid(1_000))
}

fn rows(filter: &Filter, snapshot: &Snapshot, now: i64) -> Vec<Vec<String>> {
    let Some(view) = snapshot.captures.value.as_ref() else {
        return Vec::new();
    };
    filter.apply(
        view.list
            .iter()
            .map(|c| {
                vec![
                    c.community.to_string(),
                    c.reader.chars().take(12).collect(),
                    if c.registered {
                        c.query.clone()
                    } else {
                        "(capturing)".into()
                    },
                    if c.registered {
                        secs(now - c.created_ms)
                    } else {
                        String::new()
                    },
                    secs(c.until_ms - now),
                    format!("{}/{}", c.pages_served, c.pages),
                    c.entries.to_string(),
                    c.bytes.to_string(),
                ]
            })
            .collect(),
    )
}

impl Component for CapturesPane {
    fn title(&self) -> &'static str {
        "Captures"
    }

    fn filter(&mut self) -> &mut Filter {
        &mut self.filter
    }

    fn handle_key(&mut self, key: KeyEvent, snapshot: &Snapshot) -> Option<Action> {
        let len = rows(&self.filter, snapshot, now_ms()).len();
        self.filter.navigate(&key, len);
        None
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, snapshot: &Snapshot) {
        let now = now_ms();
        let list = rows(&self.filter, snapshot, now);
        let selected = self.filter.clamp(list.len());
        let [head, body] =
            Layout::vertical([Constraint::Length(3), Constraint::Min(3)]).areas(area);
        let source = &snapshot.captures;
        let line = match source.value.as_ref() {
            Some(view) => {
                let (n, bytes) = view.in_use(now);
                format!(
                    "in {}: {n}/{} captures, {:.1}/{:.0} MiB charged",
                    view.store,
                    view.max_captures,
                    bytes as f64 / 1_048_576.0,
                    view.max_bytes as f64 / 1_048_576.0
                )
            }
            None => "no capture data yet".to_owned(),
        };
        let style = if source.is_stale() {
            Style::new().fg(Color::Yellow)
        } else {
            Style::new()
        };
        frame.render_widget(
            Paragraph::new(line)
                .style(style)
                .block(titled("Shared quota", source.error.as_ref())),
            head,
        );
        let header = Row::new([
            "community",
            "reader",
            "query",
            "age",
            "left",
            "pages",
            "entries",
            "bytes",
        ])
        .style(Style::new().add_modifier(Modifier::BOLD));
        let table = Table::new(
            list.into_iter().enumerate().map(|(i, r)| {
                let style = if i == selected {
                    Style::new().add_modifier(Modifier::REVERSED)
                } else {
                    Style::new()
                };
                Row::new(r).style(style)
            }),
            [
                Constraint::Length(9),
                Constraint::Length(12),
                Constraint::Min(12),
                Constraint::Length(6),
                Constraint::Length(6),
                Constraint::Length(7),
                Constraint::Length(7),
                Constraint::Length(9),
            ],
        )
        .header(header)
        .block(titled(&format!("Captures{}", self.filter.label()), None));
        frame.render_widget(table, body);
    }
}
