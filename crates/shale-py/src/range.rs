//! Key ranges as the bindings take them from Python: `start`/`end` (end excluded) and a
//! `prefix`, turned into the engine's bounds. Plain functions, no state.

use std::ops::Bound;

/// `(start, end)` as the engine's half-open key range.
pub(crate) type Bounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

pub(crate) fn bounds(start: Option<Vec<u8>>, end: Option<Vec<u8>>) -> Bounds {
    (
        start.map_or(Bound::Unbounded, Bound::Included),
        end.map_or(Bound::Unbounded, Bound::Excluded),
    )
}

/// The smallest key after every key that starts with `prefix` (`None`: there is none).
pub(crate) fn prefix_bounds(prefix: Vec<u8>) -> Bounds {
    let mut end = prefix.clone();
    let upper = loop {
        match end.pop() {
            Some(last) if last < 0xff => {
                end.push(last + 1);
                break Bound::Excluded(end);
            }
            Some(_) => continue,
            None => break Bound::Unbounded,
        }
    };
    (Bound::Included(prefix), upper)
}

/// `[start, end)` narrowed to the keys that start with `prefix`: `(lower, upper)`, each
/// `None` where unbounded.
pub(crate) fn key_range(
    start: Option<Vec<u8>>,
    end: Option<Vec<u8>>,
    prefix: Option<Vec<u8>>,
) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let Some(prefix) = prefix else {
        return (start, end);
    };
    let (Bound::Included(low), high) = prefix_bounds(prefix) else {
        return (start, end); // prefix_bounds always includes the prefix itself
    };
    let high = match high {
        Bound::Excluded(high) => Some(high),
        _ => None,
    };
    let lower = Some(start.map_or(low.clone(), |s| s.max(low)));
    let upper = match (end, high) {
        (Some(e), Some(h)) => Some(e.min(h)),
        (e, h) => e.or(h),
    };
    (lower, upper)
}
