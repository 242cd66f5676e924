//! Text indexes: keyword (BM25) search over the values under a key prefix, exact and
//! current at every acknowledged write.
//!
//! ```text
//!   let db = Arc::new(Db::open(path, Options::default())?);
//!   let docs = TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("doc/"))?;
//!   db.put("doc/1", "The Porter stemmer, as RFC 9110 does not say")?;   // any write path
//!   let hits = docs.search("porter stemming", &KeywordOptions::k(10))?;  // found at once
//! ```
//!
//! A text index follows its database's writes through a [`shale::WriteHook`]: for each
//! value put under its prefix, the hook derives a **document record** (each distinct term
//! with its frequency, the document's length, the value's hash; `format.rs`) and the
//! engine writes it in the same WAL record as the value, in the index's own keyspace
//! `text.<name>`. A delete, an overwrite or a range delete of values is the same of
//! records. So the records equal the values at every sequence number, after any crash,
//! in checkpoints and through compaction, with no lag and nothing to replay.
//!
//! Searches run over an in-memory inverted index (`inverted.rs`) built from the records at
//! open and changed by the records of each write, in commit order: a thread of the
//! index's applies them on another core, and a search first applies any still queued
//! from before its snapshot, so it sees every write acknowledged before it (`hook.rs`). Its statistics (N, the mean length, each term's document frequency) are
//! exact counts of the live documents: a document's score does not depend on where or
//! when it was written. A search reads the index at a database snapshot that holds exactly
//! the writes the index reflects (`view`), so the text of a hit, read for a phrase or a
//! highlight, is the text that was scored.
//!
//! Thread safety: a `TextIndex` is `Send + Sync`; searches share the index's read lock,
//! the applier takes the write lock for each batch of queued records.

mod analyzer;
mod bm25;
mod format;
mod highlight;
mod hook;
mod inverted;
mod open;
mod query;
mod short;
mod term_hash;

use std::ops::Range;
use std::sync::{Arc, RwLockReadGuard};

use shale::{Db, Error, Keyspace, ReadOptions, Result, Snapshot};

pub use analyzer::{Analyzer, Token};
pub use bm25::{Bm25, CorpusStats};
pub use format::{DecodeError, Definition, DocRecord, DocView, MAX_TERM_BYTES};
pub use highlight::snippet;
pub use open::TextIndexRecovery;

use hook::{Shared, TextHook};
use inverted::Inverted;
use query::{Scored, Scoring};

/// The longest index name, in bytes.
pub const MAX_INDEX_NAME: usize = 64;
/// The most hits one search returns.
pub const MAX_K: usize = 10_000;
/// The most distinct terms a query may have.
pub const MAX_QUERY_TERMS: usize = 1024;

/// What a text index covers and how it reads text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TextIndexOptions {
    /// Only keys that start with it (default: every key of the keyspace).
    pub prefix: Vec<u8>,
    /// The keyspace of the documents (`None`: the default keyspace).
    pub keyspace: Option<String>,
    /// Default [`Analyzer::English`].
    pub analyzer: Analyzer,
}

impl TextIndexOptions {
    pub fn new() -> TextIndexOptions {
        TextIndexOptions::default()
    }

    pub fn prefix(mut self, prefix: impl AsRef<[u8]>) -> TextIndexOptions {
        self.prefix = prefix.as_ref().to_vec();
        self
    }

    pub fn keyspace(mut self, name: impl Into<String>) -> TextIndexOptions {
        self.keyspace = Some(name.into());
        self
    }

    pub fn analyzer(mut self, analyzer: Analyzer) -> TextIndexOptions {
        self.analyzer = analyzer;
        self
    }

    fn definition(&self) -> Definition {
        Definition {
            analyzer: self.analyzer,
            keyspace: self.keyspace.clone().filter(|k| k != "default"),
            prefix: self.prefix.clone(),
        }
    }
}

/// How the terms of a query combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Match {
    /// Documents holding any term, ranked by BM25 (top k by MaxScore).
    #[default]
    Any,
    /// Documents holding every term.
    All,
    /// Documents holding the query's terms next to one another, in order.
    Phrase,
}

/// What a keyword search looks at and returns.
#[derive(Debug, Clone, PartialEq)]
pub struct KeywordOptions {
    /// Hits wanted, at most [`MAX_K`]. Default 10.
    pub k: usize,
    pub mode: Match,
    pub bm25: Bm25,
    /// Only keys `>= lower_bound` (within the index's prefix).
    pub lower_bound: Option<Vec<u8>>,
    /// Only keys `< upper_bound`.
    pub upper_bound: Option<Vec<u8>>,
    /// Return each hit's text and the byte spans of its matching terms.
    pub highlight: bool,
    /// Score every posting of every term instead of pruning: the same hits, slower (the
    /// reference the benchmark and the tests compare with).
    pub exhaustive: bool,
    /// Score with these statistics instead of the index's own: those of a corpus this
    /// index holds part of (see [`CorpusStats`]).
    pub corpus: Option<CorpusStats>,
}

impl Default for KeywordOptions {
    fn default() -> Self {
        KeywordOptions::k(10)
    }
}

impl KeywordOptions {
    /// `k` hits, every other option at its default.
    pub fn k(k: usize) -> KeywordOptions {
        KeywordOptions {
            k,
            mode: Match::Any,
            bm25: Bm25::default(),
            lower_bound: None,
            upper_bound: None,
            highlight: false,
            exhaustive: false,
            corpus: None,
        }
    }

    pub fn mode(mut self, mode: Match) -> KeywordOptions {
        self.mode = mode;
        self
    }

    /// Only keys in `[lower, upper)`.
    pub fn range(mut self, lower: impl AsRef<[u8]>, upper: impl AsRef<[u8]>) -> KeywordOptions {
        self.lower_bound = Some(lower.as_ref().to_vec());
        self.upper_bound = Some(upper.as_ref().to_vec());
        self
    }

    /// Only keys that start with `prefix`.
    pub fn prefix(mut self, prefix: impl AsRef<[u8]>) -> KeywordOptions {
        self.lower_bound = Some(prefix.as_ref().to_vec());
        self.upper_bound = shale::prefix_successor(prefix.as_ref());
        self
    }

    pub fn highlight(mut self) -> KeywordOptions {
        self.highlight = true;
        self
    }

    pub fn exhaustive(mut self) -> KeywordOptions {
        self.exhaustive = true;
        self
    }

    /// Score with `corpus`'s statistics (a corpus this index holds part of).
    pub fn corpus(mut self, corpus: CorpusStats) -> KeywordOptions {
        self.corpus = Some(corpus);
        self
    }

    fn check(&self) -> Result<()> {
        let mut problems = Vec::new();
        if self.k > MAX_K {
            problems.push(format!("k = {} is over the limit of {MAX_K}", self.k));
        }
        let Bm25 { k1, b } = self.bm25;
        if !(k1.is_finite() && k1 >= 0.0) {
            problems.push(format!("k1 = {k1} must be finite and >= 0"));
        }
        if !(0.0..=1.0).contains(&b) {
            problems.push(format!("b = {b} must be within [0, 1]"));
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(Error::InvalidOptions(problems)),
        }
    }
}

/// One keyword search result.
#[derive(Debug, Clone, PartialEq)]
pub struct KeywordHit {
    pub key: Vec<u8>,
    /// The BM25 score (see `query/mod.rs` for the formula).
    pub score: f64,
    /// The document's text, when highlights were asked for.
    pub text: Option<String>,
    /// Byte spans of `text` whose terms the query holds.
    pub highlights: Vec<Range<usize>>,
}

/// What the index holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextIndexStats {
    /// Live documents (BM25's N).
    pub documents: u64,
    /// Distinct terms of the live documents.
    pub terms: u64,
    /// Tokens in all live documents.
    pub tokens: u64,
}

/// A named text index over the keys under a prefix. See the module documentation.
pub struct TextIndex {
    db: Arc<Db>,
    name: String,
    definition: Definition,
    data: Keyspace,
    shared: Arc<Shared>,
    recovery: TextIndexRecovery,
}

impl TextIndex {
    /// Open the text index `name` of `db`, creating it if it does not exist: from the
    /// records it left, repairing those that disagree with the values (values written
    /// while it was not open), analyzing every value if it is new or its options changed.
    /// Opening an index that is open already returns another handle to it.
    ///
    /// # Errors
    /// `InvalidOptions` for a bad name; `InvalidArgument` if it is open with other options,
    /// or a value under the prefix is not text; the database's errors.
    pub fn open(db: &Arc<Db>, name: &str, opts: TextIndexOptions) -> Result<TextIndex> {
        check_name(name)?;
        let definition = opts.definition();
        let hook_name = format!("text:{name}");
        let data_name = definition.keyspace.as_deref().unwrap_or("default");
        if db.options().keyspace_filter(data_name).is_some() {
            // A compaction filter removes values without a write: their records would stay.
            return Err(Error::InvalidArgument(format!(
                "text index {name:?}: keyspace {data_name:?} has a compaction filter (a TTL \
                 database's, say), which removes values without writing their deletes"
            )));
        }
        let data = db.keyspace(data_name)?;
        if let Some(open) = db.hook(&hook_name) {
            return Self::reopened(db, name, definition, data, open);
        }
        let records = db.keyspace_with(&records_keyspace(name), records_options(db))?;
        open::write_definition(db, &records, &definition.encode())?;
        let shared = Arc::new(Shared::opening());
        let hook = Arc::new(TextHook {
            name: hook_name.clone(),
            keyspaces: [data.id(), records.id()],
            prefix: definition.prefix.clone(),
            prefix_end: shale::prefix_successor(&definition.prefix),
            analyzer: definition.analyzer,
            shared: Arc::clone(&shared),
            applier: std::sync::Mutex::new(None),
        });
        let snapshot = db.attach(Arc::clone(&hook) as Arc<dyn shale::WriteHook>)?;
        let opened = open::build(&hook, &data, &records, &snapshot).and_then(|(ix, repairs, r)| {
            drop(snapshot);
            shared.go_live(ix);
            hook.start_applier()?;
            open::write_repairs(db, &records, &shared, &repairs)?;
            Ok(r)
        });
        match opened {
            Ok(recovery) => Ok(TextIndex {
                db: Arc::clone(db),
                name: name.to_owned(),
                definition,
                data,
                shared,
                recovery,
            }),
            Err(e) => {
                db.detach(&hook_name);
                Err(e)
            }
        }
    }

    /// Open the existing text index `name` with the options it was made with; `None` if
    /// there is none.
    ///
    /// # Errors
    /// `Corruption` if its definition does not decode; as [`TextIndex::open`].
    pub fn open_existing(db: &Arc<Db>, name: &str) -> Result<Option<TextIndex>> {
        match Self::definition(db, name)? {
            Some(d) => {
                let opts = TextIndexOptions {
                    prefix: d.prefix,
                    keyspace: d.keyspace,
                    analyzer: d.analyzer,
                };
                Self::open(db, name, opts).map(Some)
            }
            None => Ok(None),
        }
    }

    /// The stored definition of text index `name`, if it exists.
    ///
    /// # Errors
    /// `Corruption` if it does not decode; the database's errors.
    pub fn definition(db: &Db, name: &str) -> Result<Option<Definition>> {
        check_name(name)?;
        let ks = records_keyspace(name);
        if !db.keyspace_names().contains(&ks) {
            return Ok(None);
        }
        let Some(bytes) = db.keyspace(&ks)?.get(format::DEFINITION_KEY)? else {
            return Ok(None);
        };
        Definition::decode(&bytes)
            .map(Some)
            .map_err(|e| Error::Corruption {
                file: ks.into(),
                offset: e.offset as u64,
                reason: format!("text index definition: {}", e.reason),
            })
    }

    /// The names of the database's text indexes.
    pub fn names(db: &Db) -> Vec<String> {
        db.keyspace_names()
            .into_iter()
            .filter_map(|k| k.strip_prefix(RECORDS_PREFIX).map(str::to_owned))
            .collect()
    }

    fn reopened(
        db: &Arc<Db>,
        name: &str,
        definition: Definition,
        data: Keyspace,
        open: Arc<dyn shale::WriteHook>,
    ) -> Result<TextIndex> {
        let hook = open
            .as_any()
            .downcast::<TextHook>()
            .map_err(|_| Error::InvalidArgument(format!("hook text:{name} is not a text index")))?;
        if hook.prefix != definition.prefix
            || hook.analyzer != definition.analyzer
            || hook.keyspaces[0] != data.id()
        {
            return Err(Error::InvalidArgument(format!(
                "text index {name:?} is open with other options"
            )));
        }
        Ok(TextIndex {
            db: Arc::clone(db),
            name: name.to_owned(),
            definition,
            data,
            shared: Arc::clone(&hook.shared),
            recovery: TextIndexRecovery::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn prefix(&self) -> &[u8] {
        &self.definition.prefix
    }

    /// The keyspace of the documents, unless it is the default one.
    pub fn keyspace(&self) -> Option<&Keyspace> {
        self.definition.keyspace.as_ref().map(|_| &self.data)
    }

    pub fn analyzer(&self) -> Analyzer {
        self.definition.analyzer
    }

    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// What the open found and repaired.
    pub fn recovery(&self) -> TextIndexRecovery {
        self.recovery
    }

    /// The index's counts, with every write acknowledged before the call.
    pub fn stats(&self) -> TextIndexStats {
        let (_, ix) = self.view();
        TextIndexStats {
            documents: u64::from(ix.docs()),
            terms: ix.distinct_terms() as u64,
            tokens: ix.total_len(),
        }
    }

    /// This index's part of the statistics a search for `query` scores with, with every
    /// write acknowledged before the call.
    ///
    /// # Errors
    /// `InvalidArgument` for a query of more than [`MAX_QUERY_TERMS`] terms.
    pub fn corpus_stats(&self, query: &str) -> Result<CorpusStats> {
        let terms = self.query_terms(query)?.1;
        let (_, ix) = self.view();
        Ok(CorpusStats {
            docs: u64::from(ix.docs()),
            tokens: ix.total_len(),
            df: terms
                .into_iter()
                .filter_map(|t| Some((t.clone(), u64::from(ix.term(&t)?.df))))
                .collect(),
        })
    }

    /// The tokens of `query`, and its distinct terms in query order.
    fn query_terms(&self, query: &str) -> Result<(Vec<Token>, Vec<String>)> {
        let tokens = self.definition.analyzer.tokens(query);
        let terms = distinct(&tokens);
        if terms.len() > MAX_QUERY_TERMS {
            return Err(Error::InvalidArgument(format!(
                "the query has {} distinct terms, over the limit of {MAX_QUERY_TERMS}",
                terms.len()
            )));
        }
        Ok((tokens, terms))
    }

    /// The documents that best match `query`, best first. Sees every write acknowledged
    /// before the call, and no other state: each hit's key and text are those of one
    /// database snapshot.
    ///
    /// # Errors
    /// `InvalidOptions` for options out of range; `InvalidArgument` for a query of more
    /// than [`MAX_QUERY_TERMS`] terms; the database's errors (reading a hit's text).
    pub fn search(&self, query: &str, opts: &KeywordOptions) -> Result<Vec<KeywordHit>> {
        Ok(self.search_at(query, opts)?.0)
    }

    /// [`TextIndex::search`], and the snapshot its hits are consistent with (hybrid
    /// queries check the other retriever's hits against it).
    ///
    /// # Errors
    /// As [`TextIndex::search`].
    pub fn search_at(
        &self,
        query: &str,
        opts: &KeywordOptions,
    ) -> Result<(Vec<KeywordHit>, Snapshot)> {
        opts.check()?;
        let (tokens, terms) = self.query_terms(query)?;
        let (snapshot, ix) = self.view();
        let (lower, upper) = self.bounds(opts);
        let Some(mut scoring) = Scoring::new(&ix, opts.bm25, &terms, opts.corpus.as_ref())? else {
            return Ok((Vec::new(), snapshot));
        };
        if opts.lower_bound.is_some() || opts.upper_bound.is_some() {
            scoring.lower = &lower;
            scoring.upper = upper.as_deref();
        }
        let phrase = opts.mode == Match::Phrase && tokens.len() > 1;
        let scored = match opts.mode {
            _ if opts.k == 0 => Vec::new(),
            Match::Any if opts.exhaustive => best(&ix, scoring.all_any(), opts.k),
            Match::Any => scoring.top_any(opts.k),
            Match::All | Match::Phrase if phrase => scoring.top_all(usize::MAX, terms.len()),
            Match::All | Match::Phrase => scoring.top_all(opts.k, terms.len()),
        };
        let found: Vec<(Vec<u8>, f64)> = scored
            .iter()
            .filter_map(|s| Some((ix.key_of(s.id)?.to_vec(), s.score)))
            .collect();
        // The text is read at the snapshot, without holding the index.
        drop(ix);
        let mut hits = Vec::with_capacity(opts.k.min(found.len()));
        for (key, score) in found {
            if hits.len() == opts.k {
                break;
            }
            let mut hit = KeywordHit {
                key,
                score,
                text: None,
                highlights: Vec::new(),
            };
            if phrase || opts.highlight {
                let text = self.text_at(&hit.key, &snapshot)?;
                if phrase && !highlight::has_phrase(self.definition.analyzer, &text, &tokens) {
                    continue;
                }
                if opts.highlight {
                    hit.highlights = highlight::spans(self.definition.analyzer, &text, &terms);
                    hit.text = Some(text);
                }
            }
            hits.push(hit);
        }
        Ok((hits, snapshot))
    }

    /// A database snapshot and the index, read-locked, holding exactly the same writes.
    /// Records are queued before their write is visible and applied in order, and none is
    /// between the queue and the index while the lock is held: so the index holds every
    /// write of the snapshot once nothing at or before it is queued, and no other once it
    /// changed last at or before it. Behind, the search applies the queue itself; ahead
    /// (the write that changed it is still publishing), it takes a newer snapshot.
    fn view(&self) -> (Snapshot, RwLockReadGuard<'_, Inverted>) {
        loop {
            let snapshot = self.db.snapshot();
            let ix = self.shared.read();
            if self.shared.queued_through(snapshot.seq()) {
                drop(ix);
                self.shared.apply_pending();
            } else if snapshot.seq() >= self.shared.changed_at() {
                return (snapshot, ix);
            } else {
                drop(ix);
                std::thread::yield_now();
            }
        }
    }

    fn bounds(&self, opts: &KeywordOptions) -> (Vec<u8>, Option<Vec<u8>>) {
        let prefix = &self.definition.prefix;
        let lower = match &opts.lower_bound {
            Some(l) if l.as_slice() > prefix.as_slice() => l.clone(),
            _ => prefix.clone(),
        };
        let prefix_end = shale::prefix_successor(prefix);
        let upper = match (&opts.upper_bound, prefix_end) {
            (Some(u), Some(pe)) => Some(u.clone().min(pe)),
            (Some(u), None) => Some(u.clone()),
            (None, pe) => pe,
        };
        (lower, upper)
    }

    /// The text of document `key` at `snapshot`.
    fn text_at(&self, key: &[u8], snapshot: &Snapshot) -> Result<String> {
        let value = self
            .data
            .get_opt(key, &ReadOptions::at(snapshot))?
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "text index {:?}: document {:?} is indexed but has no value",
                    self.name,
                    String::from_utf8_lossy(key)
                ))
            })?;
        Ok(hook::document_text(&value).unwrap_or("").to_owned())
    }
}

/// The records' keyspace: read whole at open and never by key, so large zstd blocks and
/// no bloom filters.
fn records_options(db: &Db) -> shale::KeyspaceOptions {
    shale::KeyspaceOptions {
        block_size: 32 << 10,
        filter_bits_per_key: 0,
        compression: shale::Compression::Zstd(3),
        ..shale::KeyspaceOptions::from_db(db.options())
    }
}

/// The keyspace of index `name`'s records.
fn records_keyspace(name: &str) -> String {
    format!("{RECORDS_PREFIX}{name}")
}

const RECORDS_PREFIX: &str = "text.";

fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_INDEX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match ok {
        true => Ok(()),
        false => Err(Error::InvalidOptions(vec![format!(
            "text index name {name:?} must be 1 to {MAX_INDEX_NAME} of [A-Za-z0-9_-]"
        )])),
    }
}

/// The distinct terms of `tokens`, in order of first appearance.
fn distinct(tokens: &[Token]) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    tokens
        .iter()
        .map(|t| format::clip_term(t.term.clone()))
        .filter(|t| seen.insert(t.clone()))
        .collect()
}

/// The best `k` of `all`: by score, then by key.
fn best(ix: &Inverted, mut all: Vec<Scored>, k: usize) -> Vec<Scored> {
    all.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| ix.key_of(a.id).cmp(&ix.key_of(b.id)))
    });
    all.truncate(k);
    all
}
