//! The deterministic cooperative scheduler: all ranks on one thread.
//!
//! Each rank runs until it must block (a wait whose collective has not completed, or a
//! blocking collective), then the next rank runs, round-robin in rank order. A blocked rank
//! becomes runnable when its collective completes. When no rank is runnable and some have not
//! finished, the program would hang on real hardware: that is reported as a deadlock naming,
//! per blocked rank, what it waits for and what that is stuck behind. Since the engine
//! snapshots inputs at issue and delivers outputs at the wait, the results do not depend on
//! this (or any) interleaving.

use super::engine::{CollId, Engine};
use crate::error::SimError;
use commlir_ir::OpId;

/// Why a rank stopped running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The rank's program ended.
    Finished,
    /// The rank waits at `at` for collective `on` to complete.
    Blocked { at: OpId, on: CollId },
}

/// One rank's program, resumable after blocking.
pub trait RankTask {
    /// Runs until the rank finishes or must block. Called again only once the collective it
    /// blocked on has completed.
    fn resume(&mut self, engine: &mut Engine) -> Result<Progress, SimError>;
}

/// Runs every task to completion; `tasks[r]` is rank `r`.
pub fn run_ranks<T: RankTask>(tasks: &mut [T], engine: &mut Engine) -> Result<(), SimError> {
    let mut state: Vec<Option<Progress>> = vec![None; tasks.len()];
    loop {
        let mut ran = false;
        for (r, task) in tasks.iter_mut().enumerate() {
            match state[r] {
                Some(Progress::Finished) => continue,
                Some(Progress::Blocked { on, .. }) if !engine.is_complete(on) => continue,
                _ => {}
            }
            state[r] = Some(task.resume(engine)?);
            ran = true;
        }
        if state.iter().all(|s| *s == Some(Progress::Finished)) {
            return Ok(());
        }
        if !ran {
            let blocked = state
                .iter()
                .enumerate()
                .filter_map(|(r, s)| match s {
                    Some(Progress::Blocked { at, on }) => Some(engine.blocked_report(r, *at, *on)),
                    _ => None,
                })
                .collect();
            return Err(SimError::Deadlock { blocked });
        }
    }
}
