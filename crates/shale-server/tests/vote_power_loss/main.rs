//! A replica's vote through a power loss, alone in its binary because `scripts/chaos.sh`
//! rebuilds it with `negative-control-unsynced-vote` and requires both modules to fail.

mod cluster_vote_power_loss;
mod vote_durability;
