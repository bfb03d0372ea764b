//! The storage commands' progress on stderr: one indicatif bar per stage, drawn only
//! when stderr is a terminal (so logs and pipes get the summary line alone).

use buzz_core::store::transfer::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::Mutex;

/// What a stage counts.
#[derive(Clone, Copy)]
pub(crate) enum Units {
    Rows,
    Bytes,
}

pub(crate) struct Bar {
    units: Units,
    current: Mutex<Option<ProgressBar>>,
}

impl Bar {
    pub(crate) fn new(units: Units) -> Bar {
        Bar {
            units,
            current: Mutex::new(None),
        }
    }

    fn style(&self, known: bool) -> ProgressStyle {
        let template = match (self.units, known) {
            (Units::Rows, true) => {
                "{msg:28} [{bar:32}] {human_pos}/{human_len} {per_sec} eta {eta}"
            }
            (Units::Rows, false) => "{msg:28} {spinner} {human_pos} {per_sec}",
            (Units::Bytes, true) => {
                "{msg:28} [{bar:32}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}"
            }
            (Units::Bytes, false) => "{msg:28} {spinner} {bytes} {bytes_per_sec}",
        };
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ")
    }
}

impl Progress for Bar {
    fn begin(&self, stage: &str, total: Option<u64>) {
        let bar = match total {
            Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
        };
        bar.set_style(self.style(total.is_some()));
        bar.set_message(stage.to_owned());
        if let Ok(mut current) = self.current.lock() {
            if let Some(old) = current.replace(bar) {
                old.finish_and_clear();
            }
        }
    }

    fn advance(&self, n: u64) {
        if let Ok(current) = self.current.lock() {
            if let Some(bar) = current.as_ref() {
                bar.inc(n);
            }
        }
    }

    fn end(&self) {
        if let Ok(mut current) = self.current.lock() {
            if let Some(bar) = current.take() {
                bar.finish_and_clear();
            }
        }
    }
}
