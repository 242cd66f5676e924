//! How much of each group's Raft log a node keeps. openraft purges nothing by itself here
//! (`max_in_snapshot_log_to_keep` is `u64::MAX`); a task per group asks it to as the
//! group's Raft metrics change (a snapshot built, a member's progress), by this policy
//! (`Keeper::purge_upto`), in steps of at least half `after_snapshot_entries` entries:
//!
//! 1. Only entries a snapshot covers go, and the last [`Retention::after_snapshot_entries`]
//!    of those stay, for followers that lag a little (openraft's own policy).
//! 2. On the leader, entries another member still needs stay: a member that matched index
//!    `m` needs the log from `m + 1`; a member that matched nothing yet (a learner receiving
//!    its first snapshot) needs it from the first entry the log held when this task first
//!    saw it so. A member whose catch-up (a snapshot's stream, then the log after it) takes
//!    longer than the leader takes to build its next snapshots still finishes: the entries
//!    after the snapshot it was sent are there when its install ends (otherwise it is sent
//!    a newer snapshot after each install, and never catches up). TiKV keeps its Raft log
//!    for its slowest follower the same way.
//! 3. What a member holds is bounded: a member that needs more than
//!    [`Retention::lagging_entries`] entries, or more than [`Retention::lagging_bytes`] bytes
//!    of them, holds nothing, and is sent a snapshot when it next needs a purged entry (a
//!    replica that is down does not grow the log without end).
//!
//! The bytes a member needs are counted from the log store's tally of bytes appended
//! ([`crate::log_store::LogStore::appended_bytes`]), sampled against the last index each
//! time the log grew by `SAMPLE_ENTRIES` entries or `SAMPLE_BYTES` bytes: the bytes
//! from an index on are the tally now less the tally at the latest sample before it (the
//! oldest sample's, for an index older than every sample: an underestimate that the
//! bound on entries still caps), within one sample's step.

use std::collections::{BTreeMap, VecDeque};

use tokio::task::JoinHandle;

use crate::group::{Group, Groups};
use crate::NodeId;

/// A sample of the appended bytes is taken when the log grew by this many entries...
const SAMPLE_ENTRIES: u64 = 64;
/// ... or by this many bytes since the last.
const SAMPLE_BYTES: u64 = 1 << 20;
/// The most samples a task keeps (the oldest go first).
const MAX_SAMPLES: usize = 4_096;

/// What a node keeps of each group's log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Entries a snapshot covers that stay, for followers that lag a little.
    pub after_snapshot_entries: u64,
    /// The most entries kept for a member still catching up.
    pub lagging_entries: u64,
    /// The most bytes of entries kept for a member still catching up.
    pub lagging_bytes: u64,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            after_snapshot_entries: 1_000,
            lagging_entries: 1_000_000,
            lagging_bytes: 1 << 30,
        }
    }
}

/// One group's log and replication as its task sees them at a tick.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tick {
    /// The last index the latest snapshot covers.
    pub snapshot: Option<u64>,
    /// The last index purged.
    pub purged: Option<u64>,
    /// The last index in the log.
    pub last: Option<u64>,
    /// When this node leads: the index each other member matched (`None`: nothing yet).
    pub followers: BTreeMap<NodeId, Option<u64>>,
    /// The log store's tally of bytes appended.
    pub appended_bytes: u64,
}

impl Tick {
    fn of(m: &openraft::RaftMetrics<NodeId, openraft::BasicNode>, appended_bytes: u64) -> Tick {
        let followers = match &m.replication {
            Some(r) => r
                .iter()
                .filter(|(id, _)| **id != m.id)
                .map(|(id, matched)| (*id, matched.map(|l| l.index)))
                .collect(),
            None => BTreeMap::new(),
        };
        Tick {
            snapshot: m.snapshot.map(|l| l.index),
            purged: m.purged.map(|l| l.index),
            last: m.last_log_index,
            followers,
            appended_bytes,
        }
    }

    /// The first index the log holds.
    fn first(&self) -> u64 {
        self.purged.map_or(0, |p| p.saturating_add(1))
    }
}

/// One group's retention: the policy, and what it remembers between ticks.
#[derive(Debug)]
pub(crate) struct Keeper {
    policy: Retention,
    /// For each member that matched nothing yet, the first index the log held when it was
    /// first seen so.
    unmatched_from: BTreeMap<NodeId, u64>,
    /// `(last index, appended bytes)` at past ticks, ascending.
    samples: VecDeque<(u64, u64)>,
    /// The last index a purge was asked up to.
    requested: Option<u64>,
}

impl Keeper {
    pub(crate) fn new(policy: Retention) -> Keeper {
        Keeper {
            policy,
            unmatched_from: BTreeMap::new(),
            samples: VecDeque::new(),
            requested: None,
        }
    }

    /// The index to purge up to (inclusive) after `tick`, if the log should be purged.
    pub(crate) fn purge_upto(&mut self, tick: &Tick) -> Option<u64> {
        self.sample(tick);
        let policy = self.policy;
        let floor = tick.snapshot?.checked_sub(policy.after_snapshot_entries)?;
        let upto = match self.needed_from(tick) {
            Some(from) => floor.min(from.checked_sub(1)?),
            None => floor,
        };
        let step = (policy.after_snapshot_entries / 2).max(1);
        let done = tick.purged.max(self.requested);
        if done.is_some_and(|d| upto < d.saturating_add(step)) {
            return None;
        }
        self.requested = Some(upto);
        Some(upto)
    }

    /// The first index a member still catching up within the bounds needs, if any does.
    fn needed_from(&mut self, tick: &Tick) -> Option<u64> {
        self.unmatched_from
            .retain(|id, _| matches!(tick.followers.get(id), Some(None)));
        let mut from = None;
        for (&id, &matched) in &tick.followers {
            let needs = match matched {
                Some(m) => m.saturating_add(1),
                None => *self
                    .unmatched_from
                    .entry(id)
                    .or_insert_with(|| tick.first()),
            };
            if self.within_bounds(needs, tick) {
                from = Some(from.map_or(needs, |f: u64| f.min(needs)));
            }
        }
        from
    }

    /// Whether keeping the log from `needs` on stays within the policy's bounds.
    fn within_bounds(&self, needs: u64, tick: &Tick) -> bool {
        let Some(last) = tick.last else {
            return true;
        };
        let entries = last.saturating_add(1).saturating_sub(needs);
        entries <= self.policy.lagging_entries
            && self.bytes_from(needs, tick) <= self.policy.lagging_bytes
    }

    /// About how many bytes the entries from `index` on take (module docs).
    fn bytes_from(&self, index: u64, tick: &Tick) -> u64 {
        let before = self
            .samples
            .iter()
            .rev()
            .find(|(last, _)| *last < index)
            .or(self.samples.front())
            .map_or(0, |(_, bytes)| *bytes);
        tick.appended_bytes.saturating_sub(before)
    }

    fn sample(&mut self, tick: &Tick) {
        if let Some(last) = tick.last {
            let grew = self.samples.back().is_none_or(|(l, b)| {
                last >= l.saturating_add(SAMPLE_ENTRIES)
                    || tick.appended_bytes >= b.saturating_add(SAMPLE_BYTES)
            });
            if grew {
                self.samples.push_back((last, tick.appended_bytes));
            }
        }
        // Keep one sample at or before the first index held; drop those before it.
        let first = tick.first();
        while self.samples.len() > 1 && self.samples.get(1).is_some_and(|(l, _)| *l < first)
            || self.samples.len() > MAX_SAMPLES
        {
            self.samples.pop_front();
        }
    }
}

/// Keep every group of `groups` by `policy` until its Raft stops; the tasks.
pub(crate) fn keep(groups: &Groups, policy: Retention) -> Vec<JoinHandle<()>> {
    groups
        .ids()
        .into_iter()
        .filter_map(|id| groups.get(id))
        .map(|g| tokio::spawn(keep_group(g, policy)))
        .collect()
}

/// Keep `group`'s log by `policy` until its Raft stops.
pub(crate) async fn keep_group(group: Group, policy: Retention) {
    let mut keeper = Keeper::new(policy);
    let mut metrics = group.raft.metrics();
    loop {
        let tick = {
            let m = metrics.borrow_and_update();
            if m.running_state.is_err() {
                return;
            }
            Tick::of(&m, group.log.appended_bytes())
        };
        if let Some(upto) = keeper.purge_upto(&tick) {
            if group.raft.trigger().purge_log(upto).await.is_err() {
                return;
            }
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: Retention = Retention {
        after_snapshot_entries: 10,
        lagging_entries: 1_000,
        lagging_bytes: 100_000,
    };

    /// A leader's tick: 100 bytes an entry, the followers' matched indexes as given.
    fn tick(snapshot: u64, purged: Option<u64>, last: u64, followers: &[Option<u64>]) -> Tick {
        Tick {
            snapshot: Some(snapshot),
            purged,
            last: Some(last),
            followers: (2..).zip(followers.iter().copied()).collect(),
            appended_bytes: (last + 1) * 100,
        }
    }

    #[test]
    fn without_laggards_the_log_is_purged_behind_the_snapshot() {
        let mut k = Keeper::new(POLICY);
        assert_eq!(k.purge_upto(&tick(100, None, 120, &[Some(120)])), Some(90));
        assert_eq!(k.purge_upto(&tick(100, Some(90), 125, &[Some(125)])), None);
        // A follower's tick: no replication to hold anything.
        assert_eq!(k.purge_upto(&tick(200, Some(90), 210, &[])), Some(190));
        // Nothing purged before the snapshot has `after_snapshot_entries` behind it.
        let mut k = Keeper::new(POLICY);
        assert_eq!(k.purge_upto(&tick(5, None, 8, &[])), None);
    }

    #[test]
    fn a_member_catching_up_holds_the_entries_it_needs() {
        let mut k = Keeper::new(POLICY);
        // A learner with nothing matched, first seen with the log held from 91.
        assert_eq!(
            k.purge_upto(&tick(100, Some(90), 150, &[Some(150), None])),
            None
        );
        // Snapshots move on while its snapshot streams: the log it will need stays.
        assert_eq!(
            k.purge_upto(&tick(300, Some(90), 320, &[Some(320), None])),
            None
        );
        // Installed the snapshot at 100: it needs 101 on.
        assert_eq!(
            k.purge_upto(&tick(300, Some(90), 330, &[Some(330), Some(100)])),
            Some(100)
        );
        // Caught up: back to the snapshot's policy.
        assert_eq!(
            k.purge_upto(&tick(300, Some(100), 330, &[Some(330), Some(330)])),
            Some(290)
        );
    }

    #[test]
    fn what_a_member_holds_is_bounded_in_entries_and_bytes() {
        let mut k = Keeper::new(POLICY);
        // Matched 1,000 entries behind the last of 2,100: within bounds (100 KB).
        assert_eq!(
            k.purge_upto(&tick(2_000, None, 2_100, &[Some(1_100)])),
            Some(1_100)
        );
        // 1,001 entries behind: over the bound, it holds nothing.
        assert_eq!(
            k.purge_upto(&tick(2_000, Some(1_100), 2_101, &[Some(1_100)])),
            Some(1_990)
        );

        // Bytes: entries of 1 KB, so 500 entries pass 100 KB.
        let mut k = Keeper::new(POLICY);
        let mut t = tick(600, None, 600, &[Some(600)]);
        t.appended_bytes = 601 * 1_000;
        assert_eq!(k.purge_upto(&t), Some(590));
        let mut t = tick(1_200, Some(590), 1_200, &[Some(650)]);
        t.appended_bytes = 1_201 * 1_000;
        assert_eq!(
            k.purge_upto(&t),
            Some(1_190),
            "over 100 KB behind: not held"
        );
        let mut t = tick(1_300, Some(1_190), 1_300, &[Some(1_250)]);
        t.appended_bytes = 1_301 * 1_000;
        assert_eq!(k.purge_upto(&t), Some(1_250), "about 100 KB behind: held");
    }
}
