//! Migrations: applied and pending, with the component that owns each (core or a
//! plugin) and when it ran; on PostgreSQL, every index with its `pg_index` flags (an
//! invalid one is marked). Read from the database: works with the relay stopped.

use super::{titled, Action, Component, Filter};
use crate::data::Snapshot;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::Frame;

#[derive(Default)]
pub(super) struct Migrations {
    filter: Filter,
}

impl Migrations {
    fn rows(&self, snapshot: &Snapshot) -> (Vec<Vec<String>>, Option<Vec<Vec<String>>>) {
        let Some(db) = snapshot.db.value.as_ref() else {
            return (Vec::new(), None);
        };
        let status = &db.report.migrations;
        let when = |v: &str| {
            db.applied_at
                .iter()
                .find(|a| a.version == v)
                .map(|a| a.run_on.clone())
                .unwrap_or_default()
        };
        let mut rows: Vec<Vec<String>> = status
            .applied
            .iter()
            .map(|m| {
                vec![
                    m.version.clone(),
                    m.owner.clone(),
                    "applied".into(),
                    when(&m.version),
                ]
            })
            .collect();
        rows.extend(status.pending.iter().map(|m| {
            vec![
                m.version.clone(),
                m.owner.clone(),
                "PENDING".into(),
                String::new(),
            ]
        }));
        let indexes = db.indexes.as_ref().map(|list| {
            self.filter.apply(
                list.iter()
                    .map(|i| {
                        let flag = |b: bool| if b { "yes" } else { "NO" };
                        vec![
                            i.name.clone(),
                            i.table_name.clone(),
                            flag(i.valid).into(),
                            flag(i.ready).into(),
                            flag(i.live).into(),
                        ]
                    })
                    .collect(),
            )
        });
        (self.filter.apply(rows), indexes)
    }
}

impl Component for Migrations {
    fn title(&self) -> &'static str {
        "Migrations"
    }

    fn filter(&mut self) -> &mut Filter {
        &mut self.filter
    }

    fn handle_key(&mut self, key: KeyEvent, snapshot: &Snapshot) -> Option<Action> {
        let len = self.rows(snapshot).0.len();
        self.filter.navigate(&key, len);
        None
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, snapshot: &Snapshot) {
        let (rows, indexes) = self.rows(snapshot);
        let [top, bottom] =
            Layout::vertical([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(area);
        let selected = self.filter.clamp(rows.len());
        let (applied, pending) = snapshot
            .db
            .value
            .as_ref()
            .map(|d| {
                (
                    d.report.migrations.applied.len(),
                    d.report.migrations.pending.len(),
                )
            })
            .unwrap_or((0, 0));
        let table = Table::new(
            rows.into_iter().enumerate().map(|(i, r)| {
                let mut style = Style::new();
                if r[2] == "PENDING" {
                    style = style.fg(Color::Yellow);
                }
                if i == selected {
                    style = style.add_modifier(Modifier::REVERSED);
                }
                Row::new(r).style(style)
            }),
            [
                Constraint::Length(16),
                Constraint::Length(18),
                Constraint::Length(8),
                Constraint::Min(19),
            ],
        )
        .header(Row::new(vec!["version", "owner", "state", "applied at"]).style(bold()))
        .block(titled(
            &format!(
                "Migrations: {applied} applied, {pending} pending{}",
                self.filter.label()
            ),
            snapshot.db.error.as_ref(),
        ));
        frame.render_widget(table, top);

        match indexes {
            None => frame.render_widget(
                Paragraph::new("SQLite: no pg_index flags (indexes are built in one transaction).")
                    .block(titled("Indexes", None)),
                bottom,
            ),
            Some(list) => {
                let bad = list
                    .iter()
                    .filter(|r| r[2..].iter().any(|f| f == "NO"))
                    .count();
                let table = Table::new(
                    list.into_iter().map(|r| {
                        let broken = r[2..].iter().any(|f| f == "NO");
                        let style = if broken {
                            Style::new().fg(Color::Red)
                        } else {
                            Style::new()
                        };
                        Row::new(r).style(style)
                    }),
                    [
                        Constraint::Min(30),
                        Constraint::Length(20),
                        Constraint::Length(5),
                        Constraint::Length(5),
                        Constraint::Length(4),
                    ],
                )
                .header(Row::new(vec!["index", "table", "valid", "ready", "live"]).style(bold()))
                .block(titled(
                    &format!("Indexes (pg_index): {bad} not valid/ready/live"),
                    None,
                ));
                frame.render_widget(table, bottom);
            }
        }
    }
}

fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}
