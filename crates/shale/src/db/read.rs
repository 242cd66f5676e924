//! The read path: memtable, frozen memtables newest first, then the SSTables.

use std::sync::atomic::Ordering;

use super::stats::Stats;
use super::DbInner;
use crate::error::Result;
use crate::key::{SeqNo, ValueKind};
use crate::memtable::MemGet;

impl DbInner {
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_open()?;
        Stats::add(&self.stats.gets, 1);
        let snapshot = SeqNo(self.visible_seq.load(Ordering::Acquire));
        let sv = self.super_version.load();
        for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            match mem.get(key, snapshot) {
                MemGet::Found(v) => return Ok(Some(v.to_vec())),
                MemGet::Deleted => return Ok(None),
                MemGet::NotFound => {}
            }
        }
        Ok(match sv.version.get(key, snapshot)? {
            Some((ValueKind::Put, v)) => Some(v),
            Some((ValueKind::Delete, _)) | None => None,
        })
    }
}
