//! Per-key time to live: a layer over [`Db`] (RocksDB's `DBWithTTL`, with a deadline per key
//! instead of one for the whole database).
//!
//! ```text
//!   stored value := user_value expiry:u64le      expiry: Unix time in ms, 0 = never
//! ```
//!
//! Every value of a TTL database carries its expiry in its last 8 bytes. Reads through
//! [`TtlDb`] strip it and treat a value whose expiry has passed as missing, so an expired
//! value is never returned, whenever compaction gets to it; the compaction filter that
//! [`TtlDb::open`] installs ([`Options::compaction_filter`]) removes it for good once a
//! compaction rewrites it. A marker file, `TTL`, in the directory keeps the two kinds of
//! database apart: [`TtlDb::open`] refuses an existing database without it. (A plain
//! [`Db::open`] of a TTL database would return values with their 8 bytes.)

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::compaction_filter::{CompactionFilter, FilterDecision};
use crate::error::{Error, Result};
use crate::{Db, Options, RangeIter, ReadOptions, WriteBatch, WriteOptions};

/// The marker file of a TTL database.
pub const TTL_MARKER: &str = "TTL";

/// Bytes of the expiry after each value.
const EXPIRY_BYTES: usize = 8;

/// The clock a TTL database reads: milliseconds since the Unix epoch.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    })
}

/// A database whose values may expire. See the module documentation.
pub struct TtlDb {
    db: Db,
    clock: Clock,
}

/// A stored value's user part and expiry (docs/format.md section 14), or `None` for a
/// value too short to carry one.
pub fn decode_value(stored: &[u8]) -> Option<(&[u8], u64)> {
    let at = stored.len().checked_sub(EXPIRY_BYTES)?;
    let (value, expiry) = stored.split_at(at);
    Some((value, u64::from_le_bytes(expiry.try_into().ok()?)))
}

/// `value` with `expiry` after it, as a TTL database stores it (docs/format.md section 14).
pub fn encode_value(value: &[u8], expiry: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + EXPIRY_BYTES);
    out.extend_from_slice(value);
    out.extend_from_slice(&expiry.to_le_bytes());
    out
}

/// The user value of `stored` if it has not expired at `now`.
fn live(stored: &[u8], now: u64, path: &Path) -> Result<Option<Vec<u8>>> {
    let (value, expiry) = decode_value(stored).ok_or_else(|| {
        Error::corruption(
            path,
            0,
            "a value of a TTL database is shorter than its expiry",
        )
    })?;
    Ok((expiry == 0 || expiry > now).then(|| value.to_vec()))
}

/// Removes the values whose expiry has passed.
struct ExpiryFilter {
    clock: Clock,
}

impl CompactionFilter for ExpiryFilter {
    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> FilterDecision {
        match decode_value(value) {
            Some((_, expiry)) if expiry != 0 && expiry <= (self.clock)() => FilterDecision::Remove,
            _ => FilterDecision::Keep,
        }
    }
}

impl TtlDb {
    /// Open (or create) the TTL database at `path` with the system clock. `opts` apply
    /// as for [`Db::open`]; their `compaction_filter` must be unset (the layer installs
    /// its own).
    ///
    /// # Errors
    /// `InvalidArgument` for an existing database that is not a TTL one (no `TTL` file),
    /// or options with a compaction filter; the errors of [`Db::open`].
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<TtlDb> {
        TtlDb::open_with_clock(path, opts, system_clock())
    }

    /// [`TtlDb::open`] with another clock (tests, simulations).
    ///
    /// # Errors
    /// As [`TtlDb::open`].
    pub fn open_with_clock(path: impl AsRef<Path>, opts: Options, clock: Clock) -> Result<TtlDb> {
        let path = path.as_ref();
        if opts.compaction_filter.is_some() {
            return Err(Error::invalid(
                "a TTL database installs its own compaction filter",
            ));
        }
        let fs = Arc::clone(&opts.fs);
        let marker = path.join(TTL_MARKER);
        let exists = fs.exists(&path.join(crate::filename::CURRENT));
        if exists && !fs.exists(&marker) {
            return Err(Error::invalid(format!(
                "{} holds a database without a TTL file: not a TTL database",
                path.display()
            )));
        }
        // A new database gets its marker first, so that no crash leaves it without one.
        if !exists && opts.create_if_missing && !opts.read_only {
            fs.create_dir_all(path)?;
            if !fs.exists(&marker) {
                fs.create(&marker)?.sync()?;
                fs.sync_dir(path)?;
            }
        }
        let filter: Arc<dyn CompactionFilter> = Arc::new(ExpiryFilter {
            clock: Arc::clone(&clock),
        });
        let db = Db::open(
            path,
            Options {
                compaction_filter: Some(filter),
                ..opts
            },
        )?;
        Ok(TtlDb { db, clock })
    }

    /// The database underneath (its values carry their expiry: see the module
    /// documentation).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Set `key` to `value`, never to expire.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.db.put(key, encode_value(value.as_ref(), 0))
    }

    /// Set `key` to `value` until `ttl` from now; after that, reads find nothing.
    pub fn put_with_ttl(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<()> {
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let expiry = (self.clock)().saturating_add(ttl).max(1);
        self.db.put(key, encode_value(value.as_ref(), expiry))
    }

    /// Remove `key`.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.db.delete(key)
    }

    /// Apply puts (`Some(value)`, never to expire) and deletes (`None`) atomically.
    pub fn write(&self, entries: &[(&[u8], Option<&[u8]>)], opts: WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        for (key, value) in entries {
            match value {
                Some(value) => batch.put(key, encode_value(value, 0)),
                None => batch.delete(key),
            }
        }
        self.db.write(batch, opts)
    }

    /// The value of `key`, or `None` if it is missing or has expired.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let Some(stored) = self.db.get(key)? else {
            return Ok(None);
        };
        live(&stored, (self.clock)(), self.db.path())
    }

    /// The `(key, value)` pairs of `range` that have not expired, in key order.
    pub fn range<K: AsRef<[u8]>>(
        &self,
        range: impl std::ops::RangeBounds<K>,
    ) -> Result<TtlIter<'_>> {
        Ok(TtlIter {
            inner: self.db.range_opt(range, &ReadOptions::default())?,
            now: (self.clock)(),
            path: self.db.path(),
        })
    }

    /// Close the database (see [`Db::close`]).
    pub fn close(&self) -> Result<()> {
        self.db.close()
    }
}

/// The live `(key, value)` pairs of a range of a [`TtlDb`], as of the iterator's creation
/// (the clock is read once).
pub struct TtlIter<'a> {
    inner: RangeIter,
    now: u64,
    path: &'a Path,
}

impl TtlIter<'_> {
    /// The same pairs in descending key order.
    pub fn rev(self) -> Self {
        TtlIter {
            inner: self.inner.rev(),
            ..self
        }
    }
}

impl Iterator for TtlIter<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let (key, stored) = match self.inner.next()? {
                Ok(pair) => pair,
                Err(e) => return Some(Err(e)),
            };
            match live(&stored, self.now, self.path) {
                Ok(Some(value)) => return Some(Ok((key, value))),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}
