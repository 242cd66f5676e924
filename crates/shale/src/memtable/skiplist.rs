//! The concurrent skiplist under the memtable: one writer, any number of lock-free readers.
//!
//! A LevelDB-style skiplist (`db/skiplist.h`) whose nodes live inline in an [`Arena`], laid
//! out as in RocksDB's `InlineSkipList`: the links of the upper levels sit *before* the node
//! header, so that a node is one pointer and its level-0 link, lengths and key share a cache
//! line.
//!
//! ```text
//!   allocation (8-byte aligned, from the arena)
//!   +-------------+-----+-------------+-------------------------------+
//!   | next[h-1]   | ... | next[1]     | next[0] | key_len | value_len | user_key | trailer | value |
//!   | AtomicPtr   |     | AtomicPtr   | AtomicPtr  u32       u32     | bytes    | u64 LE  | bytes |
//!   +-------------+-----+-------------+---------^---------------------+
//!                                               NodePtr points here (struct Node, 16 bytes)
//! ```
//!
//! `key_len` counts the user key and the 8-byte trailer, which together are exactly the
//! encoded internal key of `key.rs`, so iterators hand it out without copying.
//!
//! # Thread safety
//!
//! - Writes ([`SkipList::insert`]) take the internal `writer` mutex, which also owns the arena,
//!   the height RNG and the cached splice. So writers are serialised safely; uncontended the
//!   lock costs one atomic swap each way.
//! - Reads take no lock. A new node is fully written (header, key, value and all its own
//!   links, with plain or `Relaxed` stores) before it is linked in, bottom level first, by
//!   `Release` stores into its predecessors; readers follow links with `Acquire` loads. So a
//!   reader that reaches a node sees it complete, and a node visible at level `i` is already
//!   visible at every level below `i`.
//! - `max_height` is read `Relaxed`: a reader that sees a new, larger height before the head's
//!   links at those levels sees null there and simply moves down a level.
//!
//! # Invariants
//!
//! 1. Nodes are never removed or moved, and their keys and values never change after they are
//!    linked. A node lives as long as the arena, i.e. as long as the `SkipList`.
//! 2. At every level the linked nodes are strictly increasing in internal-key order
//!    (`key::compare_internal`); (user key, seqno) pairs are unique, as the caller promises.
//! 3. A node of height `h` has initialised links for levels `0..h` and none above; it is only
//!    ever linked at levels `< h`. The head has height `MAX_HEIGHT` and an empty key that is
//!    never compared.
//! 4. `writer.splice[i]`, for every level `i`, is the last node at level `i` whose key is
//!    `<=` the key of `writer.last` (the head when there is none). It is exactly the
//!    predecessor array an insert needs for any key that sorts between `writer.last` and its
//!    level-0 successor, which makes ascending inserts O(1).
//! 5. A [`NodePtr`] handed out by a `SkipList` is only dereferenced while that list is alive
//!    (the memtable's iterator holds an `Arc` to it).

use std::cmp::Ordering;
use std::mem::size_of;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::Acquire};
use std::sync::atomic::{Ordering::Relaxed, Ordering::Release};
use std::sync::{Mutex, PoisonError};

use super::arena::Arena;
use crate::key::TRAILER_LEN;

/// The tallest a tower grows. With branching 4, 12 levels serve about 4^12 = 16M entries
/// with the expected search cost.
pub(super) const MAX_HEIGHT: usize = 12;

/// The node header; see the module diagram for what surrounds it.
#[repr(C)]
struct Node {
    next0: AtomicPtr<Node>,
    key_len: u32,
    value_len: u32,
}

const HEADER_BYTES: usize = size_of::<Node>();
const LINK_BYTES: usize = size_of::<AtomicPtr<Node>>();

/// The address of a node in some skiplist's arena. Copyable and thread-safe because it is
/// only an address: every dereference is an `unsafe` call whose contract requires the list
/// that produced it to be alive (invariant 5).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct NodePtr(NonNull<Node>);

// SAFETY: a `NodePtr` is an address. The node behind it is immutable once published except
// for its links, which are atomics (invariant 1), so it may be read from any thread.
unsafe impl Send for NodePtr {}
// SAFETY: as for `Send`; `&NodePtr` grants nothing beyond a copy of the address.
unsafe impl Sync for NodePtr {}

/// A search key: the two halves of an internal key, split once so that each comparison is a
/// `memcmp` of user keys and, only on a tie, one integer comparison of trailers.
#[derive(Clone, Copy)]
pub(super) struct Target<'a> {
    pub(super) user_key: &'a [u8],
    pub(super) trailer: u64,
}

impl<'a> Target<'a> {
    /// Split an encoded internal key exactly as `key::compare_internal` does (a slice shorter
    /// than a trailer is all user key, with trailer 0), so the list orders seek targets the
    /// same way the rest of the engine does.
    pub(super) fn from_internal_key(ikey: &'a [u8]) -> Self {
        let split = ikey.len().saturating_sub(TRAILER_LEN);
        let (user_key, trailer) = ikey.split_at_checked(split).unwrap_or((ikey, &[]));
        let trailer = trailer
            .try_into()
            .map(u64::from_le_bytes)
            .unwrap_or_default();
        Target { user_key, trailer }
    }
}

struct Writer {
    arena: Arena,
    /// xorshift64* state; never zero.
    rng: u64,
    /// Predecessors of the position just after `last` (invariant 4).
    splice: [NodePtr; MAX_HEIGHT],
    last: Option<NodePtr>,
    len: usize,
    min_seq: u64,
    max_seq: u64,
}

pub(super) struct SkipList {
    head: NodePtr,
    max_height: AtomicUsize,
    writer: Mutex<Writer>,
    // Mirrors of writer-owned counters, published for lock-free readers.
    len: AtomicUsize,
    memory_usage: AtomicUsize,
    min_seq: AtomicU64,
    max_seq: AtomicU64,
}

/// The link of `node` at `level`.
///
/// # Safety
///
/// `node` belongs to a live list, `level` is below its height, and the link is initialised.
unsafe fn link<'a>(node: NodePtr, level: usize) -> &'a AtomicPtr<Node> {
    // SAFETY: level 0 is the header's first field; level `i` sits `i` links before it, inside
    // the same allocation (invariant 3). The node pointer carries the provenance of the whole
    // arena chunk, so stepping backwards stays in bounds.
    unsafe { &*node.0.as_ptr().cast::<AtomicPtr<Node>>().sub(level) }
}

fn load(link: &AtomicPtr<Node>, order: std::sync::atomic::Ordering) -> Option<NodePtr> {
    NonNull::new(link.load(order)).map(NodePtr)
}

/// The encoded internal key and the value of `node`.
///
/// # Safety
///
/// `node` is a published, non-head node of a live list; the slices must not outlive it.
unsafe fn entry<'a>(node: NodePtr) -> (&'a [u8], &'a [u8]) {
    let n = node.0.as_ptr();
    // SAFETY: the header and the `key_len + value_len` bytes after it were written before
    // the node was published and never change (invariant 1).
    unsafe {
        let key_len = (*n).key_len as usize;
        let value_len = (*n).value_len as usize;
        let data = n.cast::<u8>().add(HEADER_BYTES);
        (
            std::slice::from_raw_parts(data, key_len),
            std::slice::from_raw_parts(data.add(key_len), value_len),
        )
    }
}

/// How `node` orders against `target`: user keys bytewise, then trailers descending.
///
/// # Safety
///
/// As for [`entry`].
unsafe fn compare(node: NodePtr, target: &Target<'_>) -> Ordering {
    // SAFETY: forwarded to the caller.
    let (key, _) = unsafe { entry(node) };
    // Node keys always have a full trailer, so this split never falls back.
    let split = key.len().saturating_sub(TRAILER_LEN);
    let (user_key, trailer) = key.split_at_checked(split).unwrap_or((key, &[]));
    match user_key.cmp(target.user_key) {
        Ordering::Equal => {
            let trailer = trailer
                .try_into()
                .map(u64::from_le_bytes)
                .unwrap_or_default();
            target.trailer.cmp(&trailer)
        }
        other => other,
    }
}

/// A tower height with P(height > h) = 4^-h, capped at `MAX_HEIGHT`.
fn random_height(rng: &mut u64) -> usize {
    let mut x = *rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *rng = x;
    // xorshift64*: the high bits of the product are the good ones. Each leading pair of zero
    // bits (probability 1/4) adds a level. `x != 0`, so the product is odd and nonzero.
    let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
    (1 + (r.leading_zeros() / 2) as usize).min(MAX_HEIGHT)
}

impl SkipList {
    pub(super) fn new() -> SkipList {
        let mut arena = Arena::new();
        let tower = (MAX_HEIGHT - 1) * LINK_BYTES;
        let base = arena.allocate(tower + HEADER_BYTES);
        // SAFETY: the allocation holds `tower + HEADER_BYTES` bytes, 8-byte aligned; we
        // initialise every link (all null) and the header before anyone can see the head.
        let head = unsafe {
            let node = base.as_ptr().add(tower).cast::<Node>();
            for level in 1..MAX_HEIGHT {
                ptr::write(
                    node.cast::<AtomicPtr<Node>>().sub(level),
                    AtomicPtr::new(ptr::null_mut()),
                );
            }
            ptr::write(
                node,
                Node {
                    next0: AtomicPtr::new(ptr::null_mut()),
                    key_len: 0,
                    value_len: 0,
                },
            );
            NodePtr(NonNull::new_unchecked(node))
        };
        let memory_usage = arena.memory_usage();
        SkipList {
            head,
            max_height: AtomicUsize::new(1),
            writer: Mutex::new(Writer {
                arena,
                rng: 0x9e37_79b9_7f4a_7c15,
                splice: [head; MAX_HEIGHT],
                last: None,
                len: 0,
                min_seq: u64::MAX,
                max_seq: 0,
            }),
            len: AtomicUsize::new(0),
            memory_usage: AtomicUsize::new(memory_usage),
            min_seq: AtomicU64::new(u64::MAX),
            max_seq: AtomicU64::new(0),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    pub(super) fn memory_usage(&self) -> usize {
        self.memory_usage.load(Relaxed)
    }

    /// Smallest and largest seqno inserted; `(u64::MAX, 0)` when empty.
    pub(super) fn seq_range(&self) -> (u64, u64) {
        (self.min_seq.load(Relaxed), self.max_seq.load(Relaxed))
    }

    /// Insert the entry `user_key ++ trailer -> value`.
    ///
    /// # Panics
    ///
    /// If the internal key or the value is 4 GiB or longer (the node stores `u32` lengths).
    pub(super) fn insert(&self, user_key: &[u8], trailer: u64, value: &[u8]) {
        let key_len = user_key
            .len()
            .checked_add(TRAILER_LEN)
            .and_then(|n| u32::try_from(n).ok())
            .expect("memtable key must be shorter than 4 GiB");
        let value_len =
            u32::try_from(value.len()).expect("memtable value must be shorter than 4 GiB");
        let target = Target { user_key, trailer };

        // A panic can only happen before the list is touched (the length checks above, or
        // the arena's size check below, which precedes any write), so a poisoned lock still
        // guards a consistent list.
        let mut guard = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let w = &mut *guard;

        let max_height = self.max_height.load(Relaxed);
        // SAFETY: every node reachable from `head` and the cached splice is in our arena.
        let prev = if unsafe { self.splice_fits(w, &target) } {
            w.splice
        } else {
            // SAFETY: as above.
            unsafe { self.find_splice(&target, max_height) }
        };
        let height = random_height(&mut w.rng);
        if height > max_height {
            // `prev` already holds the head for levels above the old height. Readers may see
            // the new height before the node; see the module comment.
            self.max_height.store(height, Relaxed);
        }

        let tower = (height - 1) * LINK_BYTES;
        let key_bytes = key_len as usize;
        let base = w
            .arena
            .allocate(tower + HEADER_BYTES + key_bytes + value_len as usize);
        // SAFETY: the allocation is 8-byte aligned and large enough for the tower, header, key
        // and value. Everything is written before the node is reachable: its own links copy
        // its predecessors' current successors (we are the only writer, so they cannot change
        // under us), then the Release stores below publish it bottom-up.
        let node = unsafe {
            let node = base.as_ptr().add(tower).cast::<Node>();
            let mut links = prev.iter().enumerate().take(height);
            if let Some((_, &p0)) = links.next() {
                ptr::write(
                    node,
                    Node {
                        next0: AtomicPtr::new(link(p0, 0).load(Relaxed)),
                        key_len,
                        value_len,
                    },
                );
            }
            for (level, &p) in links {
                ptr::write(
                    node.cast::<AtomicPtr<Node>>().sub(level),
                    AtomicPtr::new(link(p, level).load(Relaxed)),
                );
            }
            let data = node.cast::<u8>().add(HEADER_BYTES);
            ptr::copy_nonoverlapping(user_key.as_ptr(), data, user_key.len());
            let trailer_bytes = trailer.to_le_bytes();
            ptr::copy_nonoverlapping(
                trailer_bytes.as_ptr(),
                data.add(user_key.len()),
                TRAILER_LEN,
            );
            ptr::copy_nonoverlapping(value.as_ptr(), data.add(key_bytes), value.len());
            NodePtr(NonNull::new_unchecked(node))
        };
        for (level, &p) in prev.iter().enumerate().take(height) {
            debug_assert!(
                // SAFETY: `p` is a node of this list linked at `level`.
                unsafe { load(link(p, level), Relaxed) }
                    // SAFETY: a published node of this list.
                    .is_none_or(|next| unsafe { compare(next, &target) } == Ordering::Greater),
                "memtable entries must be unique and inserted at their sorted position"
            );
            // SAFETY: `p` is linked at `level` (invariant 3 and the search that found it).
            unsafe { link(p, level).store(node.0.as_ptr(), Release) };
        }

        // Invariant 4: the new node is the last `<=` node at its own levels; above them the
        // predecessors found for it are still the right ones.
        for (level, slot) in w.splice.iter_mut().enumerate() {
            *slot = if level < height {
                node
            } else {
                prev.get(level).copied().unwrap_or(self.head)
            };
        }
        w.last = Some(node);
        w.len += 1;
        let seq = trailer >> 8;
        w.min_seq = w.min_seq.min(seq);
        w.max_seq = w.max_seq.max(seq);
        self.len.store(w.len, Relaxed);
        self.min_seq.store(w.min_seq, Relaxed);
        self.max_seq.store(w.max_seq, Relaxed);
        self.memory_usage.store(w.arena.memory_usage(), Relaxed);
    }

    /// True if `target` sorts between the last inserted node and its successor, in which
    /// case `w.splice` is its predecessor array (invariant 4). Both nodes were touched by the
    /// previous insert, so for random keys this costs two cache-hot comparisons at most.
    ///
    /// # Safety
    ///
    /// `w` is this list's writer state.
    unsafe fn splice_fits(&self, w: &Writer, target: &Target<'_>) -> bool {
        let Some(last) = w.last else {
            return false;
        };
        // SAFETY: `last` and its successor are published nodes of this list.
        unsafe {
            compare(last, target) == Ordering::Less
                && load(link(last, 0), Relaxed)
                    .is_none_or(|next| compare(next, target) != Ordering::Less)
        }
    }

    /// For each level, the last node whose key is `< target` (LevelDB's
    /// `FindGreaterOrEqual` with `prev`). Levels at or above `max_height` get the head.
    ///
    /// # Safety
    ///
    /// None beyond `self` being alive; `unsafe` because it walks raw links.
    unsafe fn find_splice(&self, target: &Target<'_>, max_height: usize) -> [NodePtr; MAX_HEIGHT] {
        let mut prev = [self.head; MAX_HEIGHT];
        let mut x = self.head;
        // The node that stopped the walk one level up: it is `>= target`, so when it is also
        // the next node at this level we can go down without comparing it again.
        let mut bigger: Option<NodePtr> = None;
        for (level, slot) in prev.iter_mut().enumerate().take(max_height).rev() {
            loop {
                // SAFETY: `x` is the head or a node linked at `level + 1` or above, so it has
                // a link at `level`.
                let next = unsafe { load(link(x, level), Acquire) };
                match next {
                    // SAFETY: a published node of this list.
                    Some(n)
                        if next != bigger && unsafe { compare(n, target) } == Ordering::Less =>
                    {
                        x = n;
                    }
                    _ => {
                        bigger = next;
                        break;
                    }
                }
            }
            *slot = x;
        }
        prev
    }

    /// The first node `>= target`, or `None`.
    pub(super) fn seek(&self, target: &Target<'_>) -> Option<NodePtr> {
        let mut x = self.head;
        let mut bigger: Option<NodePtr> = None;
        let mut level = self.max_height.load(Relaxed);
        while level > 0 {
            level -= 1;
            loop {
                // SAFETY: as in `find_splice`: `x` has a link at every level we visit.
                let next = unsafe { load(link(x, level), Acquire) };
                match next {
                    // SAFETY: a published node of this list.
                    Some(n)
                        if next != bigger && unsafe { compare(n, target) } == Ordering::Less =>
                    {
                        x = n;
                    }
                    _ => {
                        bigger = next;
                        break;
                    }
                }
            }
        }
        bigger
    }

    /// The last node `< target`, or `None` if there is none.
    pub(super) fn seek_before(&self, target: &Target<'_>) -> Option<NodePtr> {
        self.walk(|n| {
            // SAFETY: `walk` passes only published nodes of this list.
            let order = unsafe { compare(n, target) };
            order == Ordering::Less
        })
    }

    /// The first node, or `None` when the list is empty.
    pub(super) fn first(&self) -> Option<NodePtr> {
        // SAFETY: the head has every link.
        unsafe { load(link(self.head, 0), Acquire) }
    }

    /// The last node, or `None` when the list is empty.
    pub(super) fn last(&self) -> Option<NodePtr> {
        self.walk(|_| true)
    }

    /// Descend from the head, moving right while `go_right(next)`; the node where the walk
    /// ends at level 0, unless that is the head.
    fn walk(&self, mut go_right: impl FnMut(NodePtr) -> bool) -> Option<NodePtr> {
        let mut x = self.head;
        let mut level = self.max_height.load(Relaxed);
        while level > 0 {
            level -= 1;
            // SAFETY: `x` has a link at every level we visit, as in `find_splice`.
            while let Some(n) = unsafe { load(link(x, level), Acquire) } {
                if !go_right(n) {
                    break;
                }
                x = n;
            }
        }
        (x != self.head).then_some(x)
    }

    /// The node after `node`, or `None`.
    ///
    /// # Safety
    ///
    /// `node` came from this list (which is alive, as `&self` shows).
    pub(super) unsafe fn next(&self, node: NodePtr) -> Option<NodePtr> {
        // SAFETY: every node has a level-0 link.
        unsafe { load(link(node, 0), Acquire) }
    }

    /// The node before `node`, or `None` (an O(log n) search, as in LevelDB).
    ///
    /// # Safety
    ///
    /// `node` came from this list.
    pub(super) unsafe fn prev(&self, node: NodePtr) -> Option<NodePtr> {
        // SAFETY: forwarded to the caller.
        let (key, _) = unsafe { self.entry(node) };
        self.seek_before(&Target::from_internal_key(key))
    }

    /// The internal key and value of `node`, borrowed for as long as the list.
    ///
    /// # Safety
    ///
    /// `node` came from this list and is not its head (every `NodePtr` the list hands out is
    /// a real entry).
    pub(super) unsafe fn entry(&self, node: NodePtr) -> (&[u8], &[u8]) {
        // SAFETY: forwarded to the caller; the list (and its arena) outlives the borrow of self.
        unsafe { entry(node) }
    }
}
