//! The interactive console: one component per pane, an [`App`] that routes keys and
//! draws the frame, and [`run`], the terminal loop (`handle events → update → render`).
//! Panes only draw the [`Snapshot`] the background refresher keeps; anything that does
//! I/O (NIP-86 calls, dry-runs) is an [`Action`] the loop runs off the UI thread.

mod captures;
mod charts;
mod frontiers;
mod list;
mod migrations;
mod moderation;
mod overview;
mod plugins;
mod policies;

use crate::data::frontiers::Reader;
use crate::data::Snapshot;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};
use ratatui::Frame;
use serde_json::Value;

pub use list::Filter;

/// What a key asks the app to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Quit,
    Refresh,
    /// Ask for one line of input; `Enter` hands it to the pane's [`Component::submit`].
    Prompt {
        label: String,
        purpose: u8,
    },
    /// A NIP-86 call for a community (host), run in the background.
    Nip86 {
        community: String,
        method: String,
        params: Value,
    },
    /// Dry-run an event against a community's scripts, in the background.
    DryRun {
        community: String,
        event: String,
    },
    /// Watch this reader in the Frontiers pane (read by the refresher thread).
    WatchFrontiers(Reader),
    /// Show a line in the status bar.
    Notify(String),
}

/// One pane.
pub trait Component {
    fn title(&self) -> &'static str;
    /// The pane's own keys, for the footer and `?` help.
    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
    fn draw(&mut self, frame: &mut Frame, area: Rect, snapshot: &Snapshot);
    /// A key the app did not take (navigation keys reach the pane too).
    fn handle_key(&mut self, _key: KeyEvent, _snapshot: &Snapshot) -> Option<Action> {
        None
    }
    /// The line typed at a prompt this pane asked for.
    fn submit(&mut self, _purpose: u8, _text: String, _snapshot: &Snapshot) -> Option<Action> {
        None
    }
    /// The `/` filter of this pane's list.
    fn filter(&mut self) -> &mut Filter;
    /// A background action's answer, for panes that show it (dry-run).
    fn answer(&mut self, _text: &str) {}
}

/// Keys every pane has.
const GLOBAL_KEYS: [(&str, &str); 6] = [
    ("1-7/Tab", "pane"),
    ("↑↓", "select"),
    ("/", "filter"),
    ("r", "refresh"),
    ("?", "help"),
    ("q", "quit"),
];

enum Mode {
    Normal,
    Filtering,
    Prompt {
        label: String,
        purpose: u8,
        text: String,
    },
    Help,
}

pub struct App {
    panes: Vec<Box<dyn Component>>,
    active: usize,
    mode: Mode,
    status: String,
}

impl App {
    /// `owner`: the pubkey NIP-86 calls are signed with (`None`: moderation read-only).
    pub fn new(owner: Option<String>) -> App {
        App {
            panes: vec![
                Box::new(overview::Overview::default()),
                Box::new(migrations::Migrations::default()),
                Box::new(plugins::Plugins::default()),
                Box::new(policies::Policies::default()),
                Box::new(moderation::Moderation::new(owner)),
                Box::new(captures::CapturesPane::default()),
                Box::new(frontiers::Frontiers::default()),
            ],
            active: 0,
            mode: Mode::Normal,
            status: String::new(),
        }
    }

    pub fn select(&mut self, pane: usize) {
        self.active = pane.min(self.panes.len() - 1);
    }

    pub fn set_status(&mut self, text: impl Into<String>) {
        self.status = text.into();
    }

    /// A background action's answer: shown in the status bar and given to the pane that
    /// asked.
    pub fn answer(&mut self, pane: usize, text: String) {
        if let Some(p) = self.panes.get_mut(pane) {
            p.answer(&text);
        }
        self.status = text;
    }

    pub fn active(&self) -> usize {
        self.active
    }

    /// Route one key; returns what the loop must do.
    pub fn handle_key(&mut self, key: KeyEvent, snapshot: &Snapshot) -> Option<Action> {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Some(Action::Quit);
        }
        match &mut self.mode {
            Mode::Help => {
                self.mode = Mode::Normal;
                None
            }
            Mode::Filtering => {
                let filter = self.panes[self.active].filter();
                match key.code {
                    KeyCode::Enter => self.mode = Mode::Normal,
                    KeyCode::Esc => {
                        filter.clear();
                        self.mode = Mode::Normal;
                    }
                    KeyCode::Backspace => filter.pop(),
                    KeyCode::Char(c) => filter.push(c),
                    _ => {}
                }
                None
            }
            Mode::Prompt { purpose, text, .. } => match key.code {
                KeyCode::Esc => {
                    self.mode = Mode::Normal;
                    None
                }
                KeyCode::Enter => {
                    let (purpose, text) = (*purpose, std::mem::take(text));
                    self.mode = Mode::Normal;
                    let action = self.panes[self.active].submit(purpose, text, snapshot);
                    self.route(action)
                }
                KeyCode::Backspace => {
                    text.pop();
                    None
                }
                KeyCode::Char(c) => {
                    text.push(c);
                    None
                }
                _ => None,
            },
            Mode::Normal => {
                let action = match key.code {
                    KeyCode::Char('q') => return Some(Action::Quit),
                    KeyCode::Char('?') => {
                        self.mode = Mode::Help;
                        return None;
                    }
                    KeyCode::Char('/') => {
                        self.mode = Mode::Filtering;
                        return None;
                    }
                    KeyCode::Char('r') => return Some(Action::Refresh),
                    KeyCode::Tab | KeyCode::Right => {
                        self.active = (self.active + 1) % self.panes.len();
                        return None;
                    }
                    KeyCode::BackTab | KeyCode::Left => {
                        self.active = (self.active + self.panes.len() - 1) % self.panes.len();
                        return None;
                    }
                    KeyCode::Char(c @ '1'..='9') => {
                        let i = c as usize - '1' as usize;
                        if i < self.panes.len() {
                            self.active = i;
                        }
                        return None;
                    }
                    _ => self.panes[self.active].handle_key(key, snapshot),
                };
                self.route(action)
            }
        }
    }

    /// Paste (bracketed paste) goes into the prompt or filter being typed.
    pub fn paste(&mut self, pasted: &str) {
        let clean: String = pasted
            .chars()
            .filter(|c| *c != '\n' && *c != '\r')
            .collect();
        match &mut self.mode {
            Mode::Prompt { text, .. } => text.push_str(&clean),
            Mode::Filtering => {
                for c in clean.chars() {
                    self.panes[self.active].filter().push(c);
                }
            }
            _ => {}
        }
    }

    /// Actions the app handles itself (prompts, notices); the rest go to the loop.
    fn route(&mut self, action: Option<Action>) -> Option<Action> {
        match action {
            Some(Action::Prompt { label, purpose }) => {
                self.mode = Mode::Prompt {
                    label,
                    purpose,
                    text: String::new(),
                };
                None
            }
            Some(Action::Notify(text)) => {
                self.status = text;
                None
            }
            other => other,
        }
    }

    pub fn draw(&mut self, frame: &mut Frame, snapshot: &Snapshot) {
        let [tabs, body, status, footer] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(0),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .areas(frame.area());
        self.draw_tabs(frame, tabs, snapshot);
        self.panes[self.active].draw(frame, body, snapshot);
        let line = match &self.mode {
            Mode::Filtering => Line::from(vec![
                Span::styled("/", Style::new().fg(Color::Yellow)),
                Span::raw(self.panes[self.active].filter().text().to_owned()),
                Span::styled("▏", Style::new().fg(Color::Yellow)),
            ]),
            Mode::Prompt { label, text, .. } => Line::from(vec![
                Span::styled(format!("{label}: "), Style::new().fg(Color::Yellow)),
                Span::raw(tail(
                    text,
                    status.width.saturating_sub(label.len() as u16 + 3),
                )),
                Span::styled("▏", Style::new().fg(Color::Yellow)),
            ]),
            _ => Line::from(self.status.clone()),
        };
        frame.render_widget(Paragraph::new(line), status);
        self.draw_footer(frame, footer);
        if matches!(self.mode, Mode::Help) {
            self.draw_help(frame, body);
        }
    }

    fn draw_tabs(&self, frame: &mut Frame, area: Rect, snapshot: &Snapshot) {
        let mut spans = Vec::new();
        // The stale marker comes first so a narrow terminal never cuts it off.
        let stale = snapshot.db.is_stale() || snapshot.processes.iter().any(|p| p.live.is_stale());
        if stale {
            spans.push(Span::styled(
                "STALE",
                Style::new().fg(Color::Black).bg(Color::Red),
            ));
            spans.push(Span::raw(" "));
        }
        let full: usize = spans.iter().map(|s| s.width()).sum::<usize>()
            + self
                .panes
                .iter()
                .map(|p| format!("{} {} ", 1, p.title()).chars().count())
                .sum::<usize>();
        // Too wide (80 columns with every pane): the other panes keep their number and
        // the first letters of their name; the active one stays whole.
        let short = full > usize::from(area.width);
        for (i, pane) in self.panes.iter().enumerate() {
            let style = if i == self.active {
                Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
            } else {
                Style::new()
            };
            let name: String = if short && i != self.active {
                pane.title().chars().take(4).collect()
            } else {
                pane.title().to_string()
            };
            spans.push(Span::styled(format!("{} {}", i + 1, name), style));
            spans.push(Span::raw(" "));
        }
        frame.render_widget(Paragraph::new(Line::from(spans)), area);
    }

    fn draw_footer(&self, frame: &mut Frame, area: Rect) {
        let keys = self.panes[self.active]
            .keys()
            .iter()
            .chain(GLOBAL_KEYS.iter());
        let mut spans = Vec::new();
        for (key, what) in keys {
            spans.push(Span::styled(*key, Style::new().fg(Color::Cyan)));
            spans.push(Span::raw(format!(" {what} ")));
        }
        frame.render_widget(
            Paragraph::new(Line::from(spans)).style(Style::new().fg(Color::Gray)),
            area,
        );
    }

    fn draw_help(&self, frame: &mut Frame, body: Rect) {
        let area = body.inner(ratatui::layout::Margin::new(4, 1));
        let mut lines = vec![Line::from(Span::styled(
            format!("{} — keys", self.panes[self.active].title()),
            Style::new().add_modifier(Modifier::BOLD),
        ))];
        for (key, what) in self.panes[self.active]
            .keys()
            .iter()
            .chain(GLOBAL_KEYS.iter())
        {
            lines.push(Line::from(format!("  {key:<9} {what}")));
        }
        lines.push(Line::from(""));
        lines.push(Line::from(
            "STALE: a source did not answer; its last figures stay shown.",
        ));
        lines.push(Line::from("Any key closes this help."));
        frame.render_widget(Clear, area);
        frame.render_widget(
            Paragraph::new(lines)
                .wrap(Wrap { trim: false })
                .block(Block::bordered().title(" help ")),
            area,
        );
    }
}

/// The last `width` characters of `text` (what was typed last stays visible).
fn tail(text: &str, width: u16) -> String {
    let chars: Vec<char> = text.chars().collect();
    let skip = chars.len().saturating_sub(width as usize);
    chars[skip..].iter().collect()
}

/// A block title with a stale marker when its source is down.
pub(crate) fn titled(title: &str, error: Option<&String>) -> Block<'static> {
    match error {
        None => Block::bordered().title(format!(" {title} ")),
        Some(e) => Block::bordered()
            .title(Line::from(vec![
                Span::raw(format!(" {title} ")),
                Span::styled(
                    format!(" STALE: {e} "),
                    Style::new().fg(Color::Black).bg(Color::Red),
                ),
            ]))
            .border_style(Style::new().fg(Color::Red)),
    }
}
