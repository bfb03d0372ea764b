//! Frontiers (issue #14): one reader's read state in one community — when their
//! account started, each channel's position and whole-channel cut, their thread rows
//! (followed or not), and what the sidebar would answer now. `c` picks the community,
//! `p` asks for the reader (hex or npub, typed or pasted); the refresher reads it off
//! the UI thread and keeps it current. Positions show here and nowhere else.

use super::{titled, Action, Component, Filter};
use crate::data::frontiers::{self as data, parse_pubkey, utc, Reader};
use crate::data::Snapshot;
use buzz_read_state::{SidebarRow, SidebarThread};
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::Frame;

const READER: u8 = 1;

#[derive(Default)]
pub(super) struct Frontiers {
    filter: Filter,
    community: usize,
    /// The reader last asked for (hex), kept when the community changes.
    pubkey: Option<String>,
}

impl Frontiers {
    fn host(&self, snapshot: &Snapshot) -> Option<String> {
        let list = &snapshot.db.value.as_ref()?.report.communities;
        list.get(self.community % list.len().max(1))
            .map(|c| c.host.clone())
    }

    fn watch(&self, snapshot: &Snapshot) -> Option<Action> {
        let pubkey = self.pubkey.clone()?;
        let Some(host) = self.host(snapshot) else {
            return Some(Action::Notify("no community stored yet".into()));
        };
        Some(Action::WatchFrontiers(Reader { host, pubkey }))
    }

    /// The shown data, if it is about the reader and community now selected.
    fn shown<'s>(&self, snapshot: &'s Snapshot) -> Option<&'s data::Frontiers> {
        let data = snapshot.frontiers.value.as_ref()?;
        let asked = Reader {
            host: self.host(snapshot)?,
            pubkey: self.pubkey.clone()?,
        };
        (data.reader == asked).then_some(data)
    }

    /// `scope, position, cut or follow, sidebar` of each channel and thread row that
    /// passes the filter.
    fn rows(&self, snapshot: &Snapshot) -> Vec<Vec<String>> {
        let Some(data) = self.shown(snapshot) else {
            return Vec::new();
        };
        let view = &data.view;
        let name = |id: &str| {
            view.channels
                .iter()
                .find(|c| c.channel_id == id)
                .and_then(|c| c.name.clone())
                .unwrap_or_else(|| short(id, 8))
        };
        let sidebar = |id: &str| view.sidebar.iter().find(|r| r.channel_id == id);
        let mut rows = Vec::new();
        for ch in &view.channels {
            let said = match sidebar(&ch.channel_id) {
                Some(row) => channel_said(row),
                None if ch.joined => "no row".into(),
                None => "not joined".into(),
            };
            rows.push(vec![
                format!(
                    "#{}",
                    ch.name.clone().unwrap_or_else(|| short(&ch.channel_id, 8))
                ),
                ch.position.map(utc).unwrap_or_else(|| "never read".into()),
                if ch.cut > 0 {
                    format!("cut {}", utc(ch.cut))
                } else {
                    "no cut".into()
                },
                said,
            ]);
        }
        for th in &view.threads {
            let said = sidebar(&th.channel_id)
                .and_then(|r| r.threads.iter().find(|t| t.root_id == th.root_id))
                .map(thread_said)
                .unwrap_or_else(|| "nothing new".into());
            rows.push(vec![
                format!(" ↳ {} #{}", short(&th.root_id, 8), name(&th.channel_id)),
                utc(th.position),
                if th.following {
                    "following"
                } else {
                    "unfollowed"
                }
                .into(),
                said,
            ]);
        }
        self.filter.apply(rows)
    }
}

fn channel_said(row: &SidebarRow) -> String {
    let threads = if row.threads.is_empty() {
        String::new()
    } else {
        format!(", {} thr", row.threads.len())
    };
    if row.unread {
        format!("unread {}@{threads}", row.mentions)
    } else {
        format!("read{threads}")
    }
}

fn thread_said(thread: &SidebarThread) -> String {
    format!("unread {}@", thread.mentions)
}

fn short(id: &str, n: usize) -> String {
    if id.chars().count() > n {
        format!("{}…", id.chars().take(n).collect::<String>())
    } else {
        id.to_owned()
    }
}

impl Component for Frontiers {
    fn title(&self) -> &'static str {
        "Frontiers"
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[("p", "reader"), ("c", "community")]
    }

    fn filter(&mut self) -> &mut Filter {
        &mut self.filter
    }

    fn handle_key(&mut self, key: KeyEvent, snapshot: &Snapshot) -> Option<Action> {
        match key.code {
            KeyCode::Char('p') => Some(Action::Prompt {
                label: "reader: pubkey (hex or npub)".into(),
                purpose: READER,
            }),
            KeyCode::Char('c') => {
                self.community += 1;
                self.filter.selected = 0;
                self.watch(snapshot)
            }
            _ => {
                let len = self.rows(snapshot).len();
                self.filter.navigate(&key, len);
                None
            }
        }
    }

    fn submit(&mut self, purpose: u8, text: String, snapshot: &Snapshot) -> Option<Action> {
        if purpose != READER {
            return None;
        }
        match parse_pubkey(&text) {
            Ok(pubkey) => {
                self.pubkey = Some(pubkey);
                self.filter.selected = 0;
                self.watch(snapshot)
            }
            Err(e) => Some(Action::Notify(e)),
        }
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, snapshot: &Snapshot) {
        let [head, body] =
            Layout::vertical([Constraint::Length(4), Constraint::Min(3)]).areas(area);
        let host = self
            .host(snapshot)
            .unwrap_or_else(|| "(no community)".into());
        let error = snapshot.frontiers.error.as_ref();
        let shown = self.shown(snapshot);
        let lines = match (&self.pubkey, shown) {
            (None, _) => vec![
                "p: type or paste a reader's pubkey (hex or npub)".to_owned(),
                "c: next community".to_owned(),
            ],
            (Some(pk), None) => vec![format!("reader {}", short(pk, 16)), "reading…".into()],
            (Some(pk), Some(data)) => {
                let v = &data.view;
                let joined = v.channels.iter().filter(|c| c.joined).count();
                let following = v.threads.iter().filter(|t| t.following).count();
                vec![
                    format!(
                        "reader {}  started {}",
                        short(pk, 16),
                        v.started_at
                            .map(utc)
                            .unwrap_or_else(|| "never (no read intent yet)".into())
                    ),
                    format!(
                        "{joined} joined, {} threads ({following} followed){}",
                        v.threads.len(),
                        if v.truncated { ", first rows only" } else { "" }
                    ),
                ]
            }
        };
        frame.render_widget(
            Paragraph::new(lines.join("\n")).block(titled(&format!("Frontiers in {host}"), error)),
            head,
        );
        let rows = self.rows(snapshot);
        let selected = self.filter.clamp(rows.len());
        let count = rows.len();
        let table = Table::new(
            rows.into_iter().enumerate().map(|(i, r)| {
                let style = if i == selected {
                    Style::new().add_modifier(Modifier::REVERSED)
                } else {
                    Style::new()
                };
                Row::new(r).style(style)
            }),
            [
                // 80 columns: 78 inside the border, 3 between columns.
                Constraint::Length(17),
                Constraint::Length(19),
                Constraint::Length(23),
                Constraint::Min(16),
            ],
        )
        .header(
            Row::new(vec![
                "scope",
                "position (UTC)",
                "cut / follow",
                "sidebar now",
            ])
            .style(Style::new().add_modifier(Modifier::BOLD)),
        )
        .block(titled(
            &format!("{count} scopes{}", self.filter.label()),
            None,
        ));
        frame.render_widget(table, body);
    }
}
