//! Policies: the scripts each community runs and whether each loads now (a broken file
//! means the relay keeps its last good script), allow/deny/error counts per entry point
//! and rate-limit hits (live, summed over the processes), and `t`: a dry-run of a
//! pasted event against the community's scripts with the database's facts.

use super::{titled, Action, Component, Filter};
use crate::data::Snapshot;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Row, Table, Wrap};
use ratatui::Frame;
use std::collections::BTreeMap;

const DRY_RUN: u8 = 1;

#[derive(Default)]
pub(super) struct Policies {
    filter: Filter,
    /// Index into the stored communities (`c` cycles).
    community: usize,
    last_run: Option<String>,
}

fn community(snapshot: &Snapshot, i: usize) -> Option<String> {
    let list = &snapshot.db.value.as_ref()?.report.communities;
    list.get(i % list.len().max(1)).map(|c| c.host.clone())
}

fn scripts(filter: &Filter, snapshot: &Snapshot) -> Vec<Vec<String>> {
    let Some(db) = snapshot.db.value.as_ref() else {
        return Vec::new();
    };
    match &db.report.policies {
        None => vec![vec![
            "(all)".into(),
            String::new(),
            "policies are disabled: only core's rules apply".into(),
            String::new(),
        ]],
        Some(list) => filter.apply(
            list.iter()
                .map(|p| {
                    let state = match &p.verdict {
                        Ok(entries) => format!("ok ({})", entries.join(", ")),
                        Err(e) => format!("BROKEN: {e}"),
                    };
                    // "host role: origin" → columns; the script's file name stays visible.
                    let (host, rest) = p.path.split_once(' ').unwrap_or(("", &p.path));
                    let (role, origin) = rest.split_once(": ").unwrap_or((rest, ""));
                    vec![
                        host.to_owned(),
                        role.to_owned(),
                        tail_fit(origin, 28),
                        state,
                    ]
                })
                .collect(),
        ),
    }
}

impl Component for Policies {
    fn title(&self) -> &'static str {
        "Policies"
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[("t", "dry-run event"), ("c", "community")]
    }

    fn filter(&mut self) -> &mut Filter {
        &mut self.filter
    }

    fn answer(&mut self, text: &str) {
        self.last_run = Some(text.to_owned());
    }

    fn handle_key(&mut self, key: KeyEvent, snapshot: &Snapshot) -> Option<Action> {
        match key.code {
            KeyCode::Char('t') => Some(match community(snapshot, self.community) {
                Some(host) => Action::Prompt {
                    label: format!("event JSON to dry-run in {host}"),
                    purpose: DRY_RUN,
                },
                None => Action::Notify("no community stored yet".into()),
            }),
            KeyCode::Char('c') => {
                self.community += 1;
                None
            }
            _ => {
                let len = scripts(&self.filter, snapshot).len();
                self.filter.navigate(&key, len);
                None
            }
        }
    }

    fn submit(&mut self, purpose: u8, text: String, snapshot: &Snapshot) -> Option<Action> {
        if purpose != DRY_RUN || text.trim().is_empty() {
            return None;
        }
        let community = community(snapshot, self.community)?;
        self.last_run = Some(format!("dry-run in {community}: running…"));
        Some(Action::DryRun {
            community,
            event: text,
        })
    }

    fn draw(&mut self, frame: &mut Frame, area: Rect, snapshot: &Snapshot) {
        let rows = scripts(&self.filter, snapshot);
        let selected = self.filter.clamp(rows.len());
        let [top, middle, bottom] = Layout::vertical([
            Constraint::Min(5),
            Constraint::Length(7),
            Constraint::Length(4),
        ])
        .areas(area);
        let table = Table::new(
            rows.into_iter().enumerate().map(|(i, r)| {
                let mut style = Style::new();
                if r[3].starts_with("BROKEN") {
                    style = style.fg(Color::Red);
                }
                if i == selected {
                    style = style.add_modifier(Modifier::REVERSED);
                }
                Row::new(r).style(style)
            }),
            [
                Constraint::Length(12),
                Constraint::Length(10),
                Constraint::Length(28),
                Constraint::Min(20),
            ],
        )
        .header(Row::new(vec!["community", "role", "script", "loads"]).style(bold()))
        .block(titled(
            &format!("Scripts{}", self.filter.label()),
            snapshot.db.error.as_ref(),
        ));
        frame.render_widget(table, top);

        // Live counts, summed over every process.
        let mut decisions: BTreeMap<String, [f64; 4]> = BTreeMap::new();
        let mut plugins: BTreeMap<String, f64> = BTreeMap::new();
        let mut stale = None;
        for p in &snapshot.processes {
            if p.live.is_stale() {
                stale = p.live.error.clone();
            }
            let Some(live) = &p.live.value else { continue };
            for ((entry, verdict), n) in &live.figures.policy {
                let slot = match verdict.as_str() {
                    "allow" => 0,
                    "deny" => 1,
                    _ => 2,
                };
                decisions.entry(entry.clone()).or_default()[slot] += n;
            }
            for (entry, n) in &live.figures.rate_limited {
                decisions.entry(entry.clone()).or_default()[3] += n;
            }
            for ((plugin, hook), n) in &live.figures.plugin_rejections {
                *plugins.entry(format!("{plugin} {hook}")).or_default() += n;
            }
        }
        let mut lines: Vec<Line> = decisions
            .iter()
            .map(|(entry, [allow, deny, error, limited])| {
                Line::from(format!(
                    "{entry:<10} allow {allow:<8} deny {deny:<8} error {error:<6} rate-limited {limited}"
                ))
            })
            .collect();
        if lines.is_empty() {
            lines.push(Line::from("no policy calls counted yet"));
        }
        // Loads per process: the same number on every process after an edit means each
        // took it; one that lags kept its last good scripts (its BROKEN line says why,
        // and its failed reloads count up).
        let loads: Vec<String> = snapshot
            .processes
            .iter()
            .filter_map(|p| {
                let l = p.live.value.as_ref()?;
                let f = &l.figures;
                let mut text = format!("{} {}", p.addr, f.policy_generation);
                if f.policy_loaded_at > 0.0 {
                    text.push_str(&format!(", last {}", ago(f.policy_loaded_at)));
                }
                if f.policy_failed_reloads > 0.0 {
                    text.push_str(&format!(", {} failed", f.policy_failed_reloads));
                }
                Some(text)
            })
            .collect();
        if !loads.is_empty() {
            lines.push(Line::from(format!("script loads: {}", loads.join(" · "))));
        }
        if !plugins.is_empty() {
            let text: Vec<String> = plugins.iter().map(|(k, n)| format!("{k} {n}")).collect();
            lines.push(Line::from(format!("plugin refusals: {}", text.join(" · "))));
        }
        frame.render_widget(
            Paragraph::new(lines).block(titled("Verdicts (live, all processes)", stale.as_ref())),
            middle,
        );
        let host = community(snapshot, self.community).unwrap_or_default();
        let text = self
            .last_run
            .clone()
            .unwrap_or_else(|| "t: paste an event (JSON) to see what the scripts say".into());
        frame.render_widget(
            Paragraph::new(text)
                .wrap(Wrap { trim: true })
                .block(titled(&format!("Dry-run ({host})"), None)),
            bottom,
        );
    }
}

/// `text`, or its last `width - 1` characters after an ellipsis.
fn tail_fit(text: &str, width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width {
        return text.to_owned();
    }
    let tail: String = chars[chars.len() - (width - 1)..].iter().collect();
    format!("…{tail}")
}

fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}

/// How long ago a unix time was: `42s ago`, `7m ago`, `3h ago`, `2d ago`.
fn ago(unix: f64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let secs = now.saturating_sub(unix as u64);
    match secs {
        0..=119 => format!("{secs}s ago"),
        120..=7_199 => format!("{}m ago", secs / 60),
        7_200..=172_799 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86_400),
    }
}
