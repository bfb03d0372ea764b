//! Plugins: every plugin built into the binary — enabled or not, its tables, its HTTP
//! routes and reserved kinds (from its manifest), the NIP-11 field it adds (from the
//! running relay) — and the selected plugin's own pane,
//! drawn generically from its `AdminPanel`: facts as `label value` lines, then each
//! table. A plugin gets its pane (captures, frontiers, routes, ...) by returning those
//! from `admin_panel`; the console names no plugin.

use super::{titled, Action, Component, Filter};
use crate::data::Snapshot;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Row, Table, Wrap};
use ratatui::Frame;

#[derive(Default)]
pub(super) struct Plugins {
    filter: Filter,
}

/// `name, state, tables, nip-11` of each plugin that passes the filter.
fn rows(filter: &Filter, snapshot: &Snapshot) -> Vec<Vec<String>> {
    let Some(db) = snapshot.db.value.as_ref() else {
        return Vec::new();
    };
    let nip11 = snapshot.nip11.value.as_ref();
    filter.apply(
        db.report
            .plugins
            .iter()
            .map(|p| {
                let applied = p.migrations.iter().filter(|(_, a)| *a).count();
                let field = match nip11 {
                    None => "relay down".to_owned(),
                    Some(doc) if doc.get(&p.name).is_some() => format!("\"{}\"", p.name),
                    Some(_) => "none".to_owned(),
                };
                vec![
                    p.name.clone(),
                    if p.enabled { "enabled" } else { "disabled" }.to_owned(),
                    if p.migrations.is_empty() {
                        "no tables".to_owned()
                    } else {
                        format!("{applied}/{} migrated", p.migrations.len())
                    },
                    field,
                ]
            })
            .collect(),
    )
}

impl Component for Plugins {
    fn title(&self) -> &'static str {
        "Plugins"
    }

    fn filter(&mut self) -> &mut Filter {
        &mut self.filter
    }

    fn handle_key(&mut self, key: KeyEvent, snapshot: &Snapshot) -> Option<Action> {
        let len = rows(&self.filter, snapshot).len();
        self.filter.navigate(&key, len);
        None
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, snapshot: &Snapshot) {
        let list = rows(&self.filter, snapshot);
        let selected = self.filter.clamp(list.len());
        let [top, bottom] = Layout::vertical([
            Constraint::Length(list.len().clamp(1, 6) as u16 + 3),
            Constraint::Min(3),
        ])
        .areas(area);
        let name = list.get(selected).map(|r| r[0].clone());
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
                Constraint::Min(18),
                Constraint::Length(9),
                Constraint::Length(14),
                Constraint::Length(18),
            ],
        )
        .header(Row::new(vec!["plugin", "state", "tables", "NIP-11 field"]).style(bold()))
        .block(titled(
            &format!("Plugins (built in){}", self.filter.label()),
            snapshot.db.error.as_ref(),
        ));
        frame.render_widget(table, top);

        let plugin = name.and_then(|n| {
            snapshot
                .db
                .value
                .as_ref()
                .and_then(|d| d.report.plugins.iter().find(|p| p.name == n))
        });
        let mut lines = Vec::new();
        let title = match plugin {
            None => "(no plugin selected)".to_owned(),
            Some(p) => {
                if p.routes.is_empty() {
                    lines.push(Line::from(format!("{:<30} none", "HTTP routes")));
                } else {
                    lines.push(Line::from("HTTP routes"));
                    for route in &p.routes {
                        lines.push(Line::from(format!("  {route}")));
                    }
                }
                if !p.reserved_kinds.is_empty() {
                    let kinds: Vec<String> = p.reserved_kinds.iter().map(u32::to_string).collect();
                    lines.push(Line::from(format!(
                        "{:<30} {}",
                        "reserved kinds",
                        kinds.join(", ")
                    )));
                }
                match &p.panel {
                    Err(e) => lines.push(Line::from(format!("status unavailable: {e}"))),
                    Ok(panel) => {
                        for (label, value) in &panel.facts {
                            lines.push(Line::from(format!("{label:<30} {value}")));
                        }
                        for t in &panel.tables {
                            lines.push(Line::styled(
                                format!("{} ({})", t.title, t.columns.join(" | ")),
                                bold(),
                            ));
                            if t.rows.is_empty() {
                                lines.push(Line::from("  (none)"));
                            }
                            for row in &t.rows {
                                lines.push(Line::from(format!("  {}", row.join(" | "))));
                            }
                        }
                    }
                }
                if let Some(field) = snapshot.nip11.value.as_ref().and_then(|d| d.get(&p.name)) {
                    lines.push(Line::styled("NIP-11", bold()));
                    lines.push(Line::from(format!("  {field}")));
                }
                p.name.clone()
            }
        };
        frame.render_widget(
            Paragraph::new(lines)
                .wrap(Wrap { trim: false })
                .block(titled(&title, snapshot.nip11.error.as_ref())),
            bottom,
        );
    }
}

fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}
