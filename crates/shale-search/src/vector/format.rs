//! The HNSW graph file: encode and decode side by side. docs/format.md, section "The HNSW
//! graph file", is the description; `tests/search/format_examples/vector.rs` decodes its
//! worked example.
//!
//! ```text
//! graph   := header node{node_count} trailer
//! header  := magic:u64 version:u32 dim:u32 m:u32 m_max:u32 m_max0:u32
//!            ef_construction:u32 ef_search:u32 ml:f64 seed:u64 node_count:u64 entry:u32
//!            metric:u8 code_kind:u8 reserved:u16
//! node    := id:u32 flags:u8 level:u8 code:u8{code_len(dim)} list{level + 1}
//! list    := count:varint neighbour:u32{count}          (level 0 first)
//! trailer := masked_crc32c(header ++ nodes):u32
//! ```
//!
//! The decoder trusts nothing: it checks the magic, the version and the checksum before it
//! reads a length, checks every length against the bytes left, and then checks the graph
//! itself (ids ascending and not too sparse, lists within capacity, every link to an existing node of a high
//! enough level, the entry point on the top level), so that a file whose checksum happens to
//! match still cannot produce a graph that breaks the search's invariants.

use std::io::{self, Write};

use super::hnsw::{Hnsw, HnswParams};
use super::quant;
use super::store::MAX_LEVEL;
use super::Metric;
use shale::inspect::codec::{self, DecodeError, Decoder};

/// "SHALEHNW" read as a big-endian u64; on disk (little-endian) the bytes are `WNHELAHS`.
pub const GRAPH_MAGIC: u64 = 0x5348_414c_4548_4e57;

/// Version 2 is the layout above (version 1 stored `f32` vectors and no metric; it is
/// refused, and its owner rebuilds the graph). Numbers are never reused.
pub const GRAPH_FORMAT_VERSION: u32 = 2;

/// The one code kind so far: `quant.rs`'s int8 codes with a per-vector scale.
const CODE_INT8: u8 = 1;

/// Bytes before the first node.
pub const GRAPH_HEADER_LEN: usize = 68;

/// `entry` when the graph is empty.
const NO_ENTRY: u32 = u32::MAX;

/// How sparse a loaded graph's ids may be: every id must be below
/// `node_count * ID_SPARSITY + ID_SLACK`.
///
/// Memory and time that follow the highest id, not the node count, are spent by the owner
/// and the search (a search's visited marks, the semantic index's per-id table), so one
/// stray id near `u32::MAX` in a file whose checksum happens to match would cost gigabytes
/// and seconds. The engine allocates ids densely; a graph sparser than this has more dead
/// ids than live nodes by a factor that makes rebuilding it from the stored vectors (what
/// the owner does with a graph file that fails to load) cheaper than loading it.
const ID_SPARSITY: u64 = 256;
const ID_SLACK: u64 = 1 << 20;

const FLAG_DELETED: u8 = 1;

/// The graph-wide fields of a file.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Header {
    pub dim: usize,
    pub params: HnswParams,
    pub node_count: usize,
    pub entry: Option<u32>,
}

/// One node as stored: `links[l]` is its list on level `l`, so its level is `links.len() - 1`.
pub(super) struct NodeRecord<'a> {
    pub id: u32,
    pub deleted: bool,
    pub code: &'a [u8],
    pub links: &'a [Vec<u32>],
}

fn u32_field(v: usize, what: &str) -> io::Result<u32> {
    u32::try_from(v).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} = {v} does not fit the graph file's u32"),
        )
    })
}

pub(super) fn encode_header(dst: &mut Vec<u8>, h: &Header) -> io::Result<()> {
    let p = &h.params;
    codec::put_u64(dst, GRAPH_MAGIC);
    codec::put_u32(dst, GRAPH_FORMAT_VERSION);
    codec::put_u32(dst, u32_field(h.dim, "dim")?);
    codec::put_u32(dst, u32_field(p.m, "m")?);
    codec::put_u32(dst, u32_field(p.m_max, "m_max")?);
    codec::put_u32(dst, u32_field(p.m_max0, "m_max0")?);
    codec::put_u32(dst, u32_field(p.ef_construction, "ef_construction")?);
    codec::put_u32(dst, u32_field(p.ef_search, "ef_search")?);
    codec::put_u64(dst, p.ml.to_bits());
    codec::put_u64(dst, p.seed);
    codec::put_u64(dst, h.node_count as u64);
    codec::put_u32(dst, h.entry.unwrap_or(NO_ENTRY));
    codec::put_u8(dst, p.metric.tag());
    codec::put_u8(dst, CODE_INT8);
    codec::put_u16(dst, 0);
    Ok(())
}

pub(super) fn encode_node(dst: &mut Vec<u8>, n: &NodeRecord<'_>) -> io::Result<()> {
    let level = n
        .links
        .len()
        .checked_sub(1)
        .and_then(|l| u8::try_from(l).ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "node without level"))?;
    codec::put_u32(dst, n.id);
    codec::put_u8(dst, if n.deleted { FLAG_DELETED } else { 0 });
    codec::put_u8(dst, level);
    dst.extend_from_slice(n.code);
    for list in n.links {
        codec::put_varint(dst, list.len() as u64);
        for &id in list {
            codec::put_u32(dst, id);
        }
    }
    Ok(())
}

/// Streams a graph to a writer, checksumming as it goes, so that writing a large graph
/// needs memory for one node at a time.
pub(super) struct GraphWriter<'w, W: Write> {
    w: &'w mut W,
    crc: u32,
    buf: Vec<u8>,
}

impl<'w, W: Write> GraphWriter<'w, W> {
    pub(super) fn new(w: &'w mut W) -> Self {
        GraphWriter {
            w,
            crc: 0,
            buf: Vec::new(),
        }
    }

    fn emit(&mut self) -> io::Result<()> {
        self.crc = codec::crc32c_extend(self.crc, &self.buf);
        self.w.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    pub(super) fn header(&mut self, h: &Header) -> io::Result<()> {
        encode_header(&mut self.buf, h)?;
        self.emit()
    }

    pub(super) fn node(&mut self, n: &NodeRecord<'_>) -> io::Result<()> {
        encode_node(&mut self.buf, n)?;
        self.emit()
    }

    pub(super) fn finish(self) -> io::Result<()> {
        self.w.write_all(&codec::mask_crc(self.crc).to_le_bytes())?;
        self.w.flush()
    }
}

fn to_usize(v: u32) -> usize {
    // Lossless on every platform Shale builds for (usize is at least 32 bits).
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// Decode the header (after the magic and version were checked).
fn decode_header(d: &mut Decoder<'_>) -> Result<Header, DecodeError> {
    let dim = to_usize(d.u32("dim")?);
    let m = to_usize(d.u32("m")?);
    let m_max = to_usize(d.u32("m_max")?);
    let m_max0 = to_usize(d.u32("m_max0")?);
    let ef_construction = to_usize(d.u32("ef_construction")?);
    let ef_search = to_usize(d.u32("ef_search")?);
    let ml = f64::from_bits(d.u64("ml")?);
    let seed = d.u64("seed")?;
    let at = d.position();
    let node_count = usize::try_from(d.u64("node_count")?)
        .map_err(|_| DecodeError::new(at, "node_count exceeds usize"))?;
    let entry = d.u32("entry")?;
    let at = d.position();
    let tag = d.u8("metric")?;
    let metric = Metric::from_tag(tag)
        .ok_or_else(|| DecodeError::new(at, format!("unknown metric {tag}")))?;
    let kind = d.u8("code kind")?;
    if kind != CODE_INT8 {
        return Err(DecodeError::new(
            at + 1,
            format!("unknown code kind {kind}"),
        ));
    }
    let reserved = d.u16("reserved")?;
    if reserved != 0 {
        return Err(DecodeError::new(
            at + 2,
            format!("reserved field {reserved:#06x} is not 0"),
        ));
    }
    Ok(Header {
        dim,
        params: HnswParams {
            m,
            m_max,
            m_max0,
            ef_construction,
            ef_search,
            ml,
            seed,
            metric,
        },
        node_count,
        entry: (node_count > 0).then_some(entry),
    })
}

/// Decode a whole graph file. Offsets in errors are from the start of `bytes`.
pub(super) fn decode(bytes: &[u8]) -> Result<Hnsw, DecodeError> {
    let body = checked_body(bytes)?;
    let mut d = Decoder::new(body);
    d.bytes(12, "magic and version")?;
    let header = decode_header(&mut d)?;
    let graph = Hnsw::load_begin(header.dim, header.params)
        .map_err(|e| DecodeError::new(12, format!("bad parameters: {e}")))?;
    let records = decode_nodes(&mut d, &header, &graph)?;
    if !d.is_empty() {
        return Err(DecodeError::new(
            d.position(),
            format!("{} bytes after the last node", d.remaining().len()),
        ));
    }
    for &(id, at) in &records {
        graph
            .load_check_links(id)
            .map_err(|reason| DecodeError::new(at, reason))?;
    }
    graph
        .load_entry(header.entry)
        .map_err(|reason| DecodeError::new(GRAPH_HEADER_LEN - 8, reason))?;
    Ok(graph)
}

/// The file's body (all but its trailer), once its magic, version and checksum are right.
fn checked_body(bytes: &[u8]) -> Result<&[u8], DecodeError> {
    let mut d = Decoder::new(bytes);
    let magic = d.u64("magic")?;
    if magic != GRAPH_MAGIC {
        return Err(DecodeError::new(
            0,
            format!("not an HNSW graph file (magic {magic:#018x})"),
        ));
    }
    let version = d.u32("format version")?;
    if version != GRAPH_FORMAT_VERSION {
        return Err(DecodeError::new(
            8,
            format!("unsupported HNSW graph format version {version}"),
        ));
    }
    let body_len = bytes
        .len()
        .checked_sub(4)
        .filter(|&n| n >= GRAPH_HEADER_LEN)
        .ok_or_else(|| {
            DecodeError::new(
                bytes.len(),
                format!(
                    "truncated: {} bytes, fewer than a header and trailer",
                    bytes.len()
                ),
            )
        })?;
    let (body, trailer) = bytes.split_at(body_len);
    let stored = codec::get_u32(trailer).ok_or_else(|| DecodeError::new(body_len, "trailer"))?;
    let actual = codec::crc32c(body);
    if codec::unmask_crc(stored) != actual {
        return Err(DecodeError::new(
            body_len,
            format!(
                "checksum mismatch: stored {:#010x}, computed {:#010x} (damaged or truncated)",
                codec::unmask_crc(stored),
                actual
            ),
        ));
    }
    Ok(body)
}

/// Every node record into `graph`, each checked; the id and offset of each.
fn decode_nodes(
    d: &mut Decoder<'_>,
    header: &Header,
    graph: &Hnsw,
) -> Result<Vec<(u32, usize)>, DecodeError> {
    let caps = (header.params.m_max0, header.params.m_max);

    let mut records: Vec<(u32, usize)> = Vec::new();
    let mut links: Vec<Vec<u32>> = Vec::new();
    let id_limit = (header.node_count as u64)
        .saturating_mul(ID_SPARSITY)
        .saturating_add(ID_SLACK);
    for _ in 0..header.node_count {
        let at = d.position();
        let id = d.u32("node id")?;
        if records.last().is_some_and(|&(prev, _)| id <= prev) {
            return Err(DecodeError::new(at, format!("node id {id} out of order")));
        }
        if u64::from(id) >= id_limit {
            return Err(DecodeError::new(
                at,
                format!(
                    "node id {id} is too sparse for {} nodes (ids must be below {id_limit})",
                    header.node_count
                ),
            ));
        }
        let flags = d.u8("node flags")?;
        if flags & !FLAG_DELETED != 0 {
            return Err(DecodeError::new(
                at + 4,
                format!("unknown node flags {flags:#04x}"),
            ));
        }
        let level = d.u8("node level")?;
        if level > MAX_LEVEL {
            return Err(DecodeError::new(
                at + 5,
                format!("node level {level} > {MAX_LEVEL}"),
            ));
        }
        let code = decode_code(d, header.dim, header.params.metric)?;
        links.resize_with(usize::from(level) + 1, Vec::new);
        for (l, list) in links.iter_mut().enumerate() {
            let cap = if l == 0 { caps.0 } else { caps.1 };
            decode_list(d, cap, list)?;
        }
        if !graph.load_node(id, flags & FLAG_DELETED != 0, level, code, &links) {
            return Err(DecodeError::new(
                at,
                format!("node {id} does not fit the graph"),
            ));
        }
        records.push((id, at));
    }
    Ok(records)
}

/// One node's code, checked: component bytes in `1..=255` (what `quant::encode` makes),
/// padding zero, a finite positive scale, a finite squared norm (1 under the cosine metric,
/// whose vectors are unit length). Anything else, a NaN included, is damage.
fn decode_code<'a>(
    d: &mut Decoder<'a>,
    dim: usize,
    metric: Metric,
) -> Result<&'a [u8], DecodeError> {
    let at = d.position();
    let code = d.bytes(quant::code_len(dim), "code")?;
    let (components, rest) = code.split_at(dim.min(code.len()));
    if let Some(i) = components.iter().position(|&u| u == 0) {
        return Err(DecodeError::new(at + i, "code component 0 (never written)"));
    }
    let padding = rest.len().saturating_sub(8);
    if rest.iter().take(padding).any(|&b| b != 0) {
        return Err(DecodeError::new(at + dim, "code padding is not zero"));
    }
    let word = |i: usize| {
        rest.get(padding + 4 * i..padding + 4 * i + 4)
            .and_then(codec::get_u32)
            .map_or(f32::NAN, f32::from_bits)
    };
    let (scale, norm2) = (word(0), word(1));
    if !(scale.is_finite() && scale > 0.0) {
        return Err(DecodeError::new(
            at + dim + padding,
            format!("code scale {scale} is not a positive number"),
        ));
    }
    let unit = !metric.normalizes() || (f64::from(norm2) - 1.0).abs() < 1e-3;
    if !(norm2.is_finite() && norm2 >= 0.0 && unit) {
        return Err(DecodeError::new(
            at + dim + padding + 4,
            format!(
                "code norm² {norm2} is not valid under the {} metric",
                metric.name()
            ),
        ));
    }
    Ok(code)
}

fn decode_list(d: &mut Decoder<'_>, cap: usize, out: &mut Vec<u32>) -> Result<(), DecodeError> {
    let at = d.position();
    let count = d.varint_usize("neighbour count")?;
    if count > cap {
        return Err(DecodeError::new(
            at,
            format!("{count} neighbours, more than the capacity {cap}"),
        ));
    }
    let raw = d.bytes(count * 4, "neighbours")?;
    out.clear();
    out.extend(raw.chunks_exact(4).filter_map(codec::get_u32));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-node graph of dimension 1 whose node (and entry point) has id `id`.
    fn one_node(id: u32) -> Vec<u8> {
        let graph = Hnsw::new(1, HnswParams::with_m(4)).expect("parameters");
        let mut out = Vec::new();
        encode_header(
            &mut out,
            &Header {
                dim: 1,
                params: *graph.params(),
                node_count: 1,
                entry: Some(id),
            },
        )
        .expect("header");
        let links = [Vec::new()];
        let code = graph.encode(&[1.0]).expect("a unit vector");
        let node = NodeRecord {
            id,
            deleted: false,
            code: &code,
            links: &links,
        };
        encode_node(&mut out, &node).expect("node");
        let crc = codec::mask_crc(codec::crc32c(&out));
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    #[test]
    fn sparse_ids_are_corruption() {
        // Found while writing the vector_graph fuzz target: one node with a huge id made
        // loading walk 4 billion ids and the first search allocate marks for all of them.
        assert!(decode(&one_node(0)).is_ok());
        let limit = u32::try_from(ID_SPARSITY + ID_SLACK).expect("small");
        assert!(decode(&one_node(limit - 1)).is_ok());
        for id in [limit, 0xf000_0000, u32::MAX - 1] {
            let err = decode(&one_node(id)).expect_err("a sparse id must be rejected");
            assert_eq!(err.offset, GRAPH_HEADER_LEN, "{}", err.reason);
        }
    }
}
