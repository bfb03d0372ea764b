//! Moderation: bans and timeouts of each community (from the database), and `b`/`o`/`u`
//! to ban, time out or lift a sanction — sent to the relay as NIP-86 calls signed with
//! an owner's key, so they are audited and take the owners' own path.

use super::{titled, Action, Component, Filter};
use crate::data::Snapshot;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::Frame;
use serde_json::json;

const BAN: u8 = 1;
const TIMEOUT: u8 = 2;

pub(super) struct Moderation {
    filter: Filter,
    community: usize,
    owner: Option<String>,
}

impl Moderation {
    pub(super) fn new(owner: Option<String>) -> Moderation {
        Moderation {
            filter: Filter::default(),
            community: 0,
            owner,
        }
    }

    fn host(&self, snapshot: &Snapshot) -> Option<String> {
        let list = &snapshot.db.value.as_ref()?.moderation;
        list.get(self.community % list.len().max(1))
            .map(|c| c.host.clone())
    }

    /// `pubkey, kind, until, reason, by` of the community's sanctions that pass.
    fn rows(&self, snapshot: &Snapshot) -> Vec<Vec<String>> {
        let Some(db) = snapshot.db.value.as_ref() else {
            return Vec::new();
        };
        let Some(c) = db
            .moderation
            .get(self.community % db.moderation.len().max(1))
        else {
            return Vec::new();
        };
        self.filter.apply(
            c.sanctions
                .iter()
                .map(|s| {
                    vec![
                        s.pubkey.clone(),
                        s.kind.clone(),
                        s.until.map(|u| u.to_string()).unwrap_or_else(|| "-".into()),
                        s.reason.clone(),
                        short(&s.by),
                    ]
                })
                .collect(),
        )
    }

    fn write_access(&self) -> Option<Action> {
        match self.owner {
            Some(_) => None,
            None => Some(Action::Notify(
                "read-only: start buzz-admin with --key-file (an owner's secret key) to moderate"
                    .into(),
            )),
        }
    }
}

fn short(pubkey: &str) -> String {
    if pubkey.chars().count() > 12 {
        format!("{}…", pubkey.chars().take(12).collect::<String>())
    } else {
        pubkey.to_owned()
    }
}

impl Component for Moderation {
    fn title(&self) -> &'static str {
        "Moderation"
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("b", "ban"),
            ("o", "timeout"),
            ("u", "lift"),
            ("c", "community"),
        ]
    }

    fn filter(&mut self) -> &mut Filter {
        &mut self.filter
    }

    fn handle_key(&mut self, key: KeyEvent, snapshot: &Snapshot) -> Option<Action> {
        let host = self.host(snapshot);
        match key.code {
            KeyCode::Char('c') => {
                self.community += 1;
                self.filter.selected = 0;
                None
            }
            KeyCode::Char('b') | KeyCode::Char('o') | KeyCode::Char('u') if host.is_none() => {
                Some(Action::Notify("no community stored yet".into()))
            }
            KeyCode::Char('b') => self.write_access().or(Some(Action::Prompt {
                label: "ban: pubkey (hex) [reason]".into(),
                purpose: BAN,
            })),
            KeyCode::Char('o') => self.write_access().or(Some(Action::Prompt {
                label: "timeout: pubkey minutes [reason]".into(),
                purpose: TIMEOUT,
            })),
            KeyCode::Char('u') => {
                if let Some(denied) = self.write_access() {
                    return Some(denied);
                }
                let rows = self.rows(snapshot);
                let row = rows.get(self.filter.clamp(rows.len()))?;
                let (method, params) = if row[1] == "ban" {
                    ("unbanpubkey", json!([row[0]]))
                } else {
                    ("timeoutpubkey", json!([row[0], 0]))
                };
                Some(Action::Nip86 {
                    community: host.unwrap_or_default(),
                    method: method.into(),
                    params,
                })
            }
            _ => {
                let len = self.rows(snapshot).len();
                self.filter.navigate(&key, len);
                None
            }
        }
    }

    fn submit(&mut self, purpose: u8, text: String, snapshot: &Snapshot) -> Option<Action> {
        let community = self.host(snapshot)?;
        let mut words = text.split_whitespace();
        let pubkey = words.next()?.to_lowercase();
        let (method, params) = match purpose {
            BAN => {
                let reason = words.collect::<Vec<_>>().join(" ");
                ("banpubkey", json!([pubkey, reason]))
            }
            TIMEOUT => {
                let minutes: i64 = match words.next().map(str::parse) {
                    Some(Ok(m)) if m > 0 => m,
                    _ => {
                        return Some(Action::Notify(
                            "timeout: minutes must be a positive number".into(),
                        ))
                    }
                };
                let reason = words.collect::<Vec<_>>().join(" ");
                let until = buzz_core::clock::Clock::now_secs(&buzz_core::clock::SystemClock)
                    + minutes * 60;
                ("timeoutpubkey", json!([pubkey, until, reason]))
            }
            _ => return None,
        };
        Some(Action::Nip86 {
            community,
            method: method.into(),
            params,
        })
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, snapshot: &Snapshot) {
        let rows = self.rows(snapshot);
        let selected = self.filter.clamp(rows.len());
        let [top, bottom] =
            Layout::vertical([Constraint::Min(4), Constraint::Length(3)]).areas(area);
        let host = self
            .host(snapshot)
            .unwrap_or_else(|| "(no community)".into());
        let count = rows.len();
        let members = snapshot
            .db
            .value
            .as_ref()
            .and_then(|d| d.moderation.iter().find(|c| c.host == host))
            .map_or(0, |c| c.members.len());
        let table = Table::new(
            rows.into_iter().enumerate().map(|(i, mut r)| {
                r[0] = short(&r[0]);
                let style = if i == selected {
                    Style::new().add_modifier(Modifier::REVERSED)
                } else {
                    Style::new()
                };
                Row::new(r).style(style)
            }),
            [
                Constraint::Length(14),
                Constraint::Length(8),
                Constraint::Length(11),
                Constraint::Min(16),
                Constraint::Length(14),
            ],
        )
        .header(Row::new(vec!["pubkey", "kind", "until", "reason", "by"]).style(bold()))
        .block(titled(
            &format!(
                "{host}: {count} bans and timeouts, {members} listed members{}",
                self.filter.label()
            ),
            snapshot.db.error.as_ref(),
        ));
        frame.render_widget(table, top);
        let who = match &self.owner {
            Some(pk) => format!("actions sign as owner {} through NIP-86", short(pk)),
            None => "read-only (no owner key given)".into(),
        };
        frame.render_widget(Paragraph::new(who).block(titled("Actions", None)), bottom);
    }
}

fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}
