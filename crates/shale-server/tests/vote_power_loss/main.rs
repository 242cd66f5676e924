//! A replica's vote through a power loss, and the two negative controls of an unsynced
//! vote (`negative_control_*`), in a binary of their own: `scripts/chaos.sh` runs the
//! controls without building the server's larger test binary.

mod cluster_vote_power_loss;
mod vote_durability;
