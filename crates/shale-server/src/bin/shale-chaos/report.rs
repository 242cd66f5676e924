//! The run's summary line, printed once the replicas agree.

use std::path::Path;

use crate::faults::Rounds;

/// The run's summary: the fault rounds, their elections, the membership changes.
pub(crate) fn report(rounds: Rounds, history: &Path) {
    let Rounds {
        mut elections,
        membership_changes,
    } = rounds;
    elections.sort();
    let median = elections
        .get(elections.len() / 2)
        .copied()
        .unwrap_or_default();
    let max = elections.last().copied().unwrap_or_default();
    eprintln!(
        "shale-chaos: {} fault rounds, one leader after each within {max:.1?} (median {median:.1?}), \
         {membership_changes} replicas removed and added back, history in {}",
        elections.len(),
        history.display()
    );
}
