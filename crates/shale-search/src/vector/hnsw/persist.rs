//! Saving and loading a graph: [`Hnsw::write_to`] and the decoder's side of
//! [`Hnsw::read_from`] (the byte layout is in `vector/format.rs` and docs/format.md).

use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;

use super::{pack_entry, unpack_entry, Hnsw, HnswParams};
use crate::vector::format;
use crate::vector::store::MAX_LEVEL;
use shale::error::Result;

impl Hnsw {
    /// Write the whole graph in the format of docs/format.md ("The HNSW graph file").
    ///
    /// Waits for inserts and deletes in flight, and holds new ones off until it returns, so
    /// the file is one consistent graph. Searches go on meanwhile.
    ///
    /// # Errors
    /// The writer's I/O error.
    pub fn write_to<W: Write>(&self, w: &mut W) -> std::io::Result<()> {
        let _exclusive = self
            .mutation
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let entry = unpack_entry(self.entry.load(Ordering::Acquire)).map(|(id, _)| id);
        let mut out = format::GraphWriter::new(w);
        out.header(&format::Header {
            dim: self.dim,
            params: self.params,
            node_count: self.len(),
            entry,
        })?;
        let mut lists: Vec<Vec<u32>> = Vec::new();
        for id in self.ids() {
            let (Some(level), Some(code)) = (self.nodes.level(id.0), self.nodes.code(id.0)) else {
                continue;
            };
            lists.resize_with(usize::from(level) + 1, Vec::new);
            for (l, list) in (0..=level).zip(lists.iter_mut()) {
                match self.nodes.links(id.0, l) {
                    Some(links) => links.read_into(list),
                    None => list.clear(),
                }
            }
            out.node(&format::NodeRecord {
                id: id.0,
                deleted: self.nodes.is_deleted(id.0),
                code,
                links: &lists,
            })?;
        }
        out.finish()
    }

    /// Read a graph written by [`Hnsw::write_to`]. `file` names the source in errors.
    ///
    /// # Errors
    /// `Error::Corruption` (with the offset in the buffer) for any damage: a bad magic,
    /// version, checksum, length or parameter, or a graph that is not well formed (a link to
    /// a missing node or one of too low a level, a list over its capacity, a wrong entry
    /// point). Never panics, whatever the bytes.
    pub fn read_from(bytes: &[u8], file: &Path) -> Result<Hnsw> {
        format::decode(bytes).map_err(|e| e.in_file(file, 0))
    }

    /// Build a graph from decoded parts. Used by the decoder only.
    pub(in crate::vector) fn load_begin(dim: usize, params: HnswParams) -> Result<Hnsw> {
        Hnsw::new(dim, params)
    }

    /// Add a decoded node; returns false if the id is taken or the level is out of range.
    pub(in crate::vector) fn load_node(
        &self,
        id: u32,
        deleted: bool,
        level: u8,
        code: &[u8],
        links: &[Vec<u32>],
    ) -> bool {
        if level > MAX_LEVEL || code.len() != self.code_len || !self.nodes.claim(id, code, level) {
            return false;
        }
        for (l, list) in (0..=level).zip(links) {
            if list.len() > self.cap(l) {
                return false;
            }
            if let Some(slots) = self.nodes.links(id, l) {
                slots.write(list);
            }
        }
        if deleted {
            self.nodes.mark_deleted(id);
            self.deleted.fetch_add(1, Ordering::AcqRel);
        }
        self.id_bound.fetch_max(u64::from(id) + 1, Ordering::AcqRel);
        self.len.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// Check invariant 3 of `store.rs` for node `id`: every neighbour on level `l` exists,
    /// is not `id` itself, appears once, and has a level of at least `l`.
    pub(in crate::vector) fn load_check_links(&self, id: u32) -> std::result::Result<(), String> {
        let level = self.nodes.level(id).ok_or("node vanished")?;
        let mut list = Vec::new();
        for l in 0..=level {
            if let Some(links) = self.nodes.links(id, l) {
                links.read_into(&mut list);
            }
            for (i, &n) in list.iter().enumerate() {
                if n == id {
                    return Err(format!("node {id} links to itself on level {l}"));
                }
                if list.get(..i).is_some_and(|before| before.contains(&n)) {
                    return Err(format!("node {id} lists {n} twice on level {l}"));
                }
                match self.nodes.level(n) {
                    None => return Err(format!("node {id} links to missing node {n}")),
                    Some(nl) if nl < l => {
                        return Err(format!(
                            "node {id} links on level {l} to node {n} of level {nl}"
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    /// Install the entry point after loading; it must be a node on the top level.
    pub(in crate::vector) fn load_entry(
        &self,
        entry: Option<u32>,
    ) -> std::result::Result<(), String> {
        let top = self.ids().filter_map(|id| self.nodes.level(id.0)).max();
        match (entry, top) {
            (None, None) => Ok(()),
            (Some(id), Some(top)) => match self.nodes.level(id) {
                Some(level) if level == top => {
                    self.entry.store(pack_entry(id, level), Ordering::Release);
                    Ok(())
                }
                Some(level) => Err(format!(
                    "entry point {id} has level {level}, the top level is {top}"
                )),
                None => Err(format!("entry point {id} is not a node")),
            },
            (Some(id), None) => Err(format!("entry point {id} in an empty graph")),
            (None, Some(_)) => Err("no entry point in a non-empty graph".to_owned()),
        }
    }
}
