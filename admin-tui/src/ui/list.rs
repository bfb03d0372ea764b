//! The `/` filter and the selection shared by every list pane.

use ratatui::crossterm::event::{KeyCode, KeyEvent};

/// A case-insensitive substring filter over a list's rows.
#[derive(Debug, Default, Clone)]
pub struct Filter {
    text: String,
    /// Selected row among the rows that pass.
    pub selected: usize,
}

impl Filter {
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn push(&mut self, c: char) {
        self.text.push(c);
        self.selected = 0;
    }

    pub fn pop(&mut self) {
        self.text.pop();
        self.selected = 0;
    }

    pub fn clear(&mut self) {
        self.text.clear();
        self.selected = 0;
    }

    /// Whether a row whose cells are `cells` passes.
    pub fn passes<S: AsRef<str>>(&self, cells: &[S]) -> bool {
        if self.text.is_empty() {
            return true;
        }
        let needle = self.text.to_lowercase();
        cells
            .iter()
            .any(|c| c.as_ref().to_lowercase().contains(&needle))
    }

    /// Keep only passing rows.
    pub fn apply(&self, rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
        rows.into_iter().filter(|r| self.passes(r)).collect()
    }

    /// ↑/↓/Home/End move the selection within `len` rows; returns whether it was one.
    pub fn navigate(&mut self, key: &KeyEvent, len: usize) -> bool {
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => {
                self.selected = (self.selected + 1).min(len.saturating_sub(1))
            }
            KeyCode::Home => self.selected = 0,
            KeyCode::End => self.selected = len.saturating_sub(1),
            _ => return false,
        }
        true
    }

    /// The selection, kept within `len` rows.
    pub fn clamp(&mut self, len: usize) -> usize {
        self.selected = self.selected.min(len.saturating_sub(1));
        self.selected
    }

    /// The filter as a block-title suffix.
    pub fn label(&self) -> String {
        if self.text.is_empty() {
            String::new()
        } else {
            format!(" /{}", self.text)
        }
    }
}
