//! The HNSW graph file and the vector store's values.

use shale::fuzzing::{expect_corruption, fuzz_path, mode, Input};
use shale::inspect::codec::{self, Decoder};

use crate::semantic::{
    decode_stored, decode_vector_value, encode_stored, vector_value as encode_vector_value,
};
use crate::vector::{Hnsw, HnswParams, NodeId};

/// The HNSW graph file (`vector/format.rs`): [`Hnsw::read_from`] over arbitrary bytes (mode
/// 0 mod 4), or over bytes whose trailing checksum is first recomputed so that the
/// structural checks behind it are reached (mode 2). A graph that loads must write out and
/// load again to the same bytes, answer searches, and take a new node. Mode odd: a graph
/// built from structured vectors writes and reads back to the same bytes.
pub fn vector_graph(data: &[u8]) {
    let (mode, rest) = mode(data);
    if mode & 1 == 0 {
        let mut bytes = rest.to_vec();
        if mode & 2 != 0 {
            reseal_graph(&mut bytes);
        }
        check_graph(&bytes);
        return;
    }
    let mut input = Input::new(rest);
    let dim = 1 + usize::from(input.u8() % 8);
    let params = HnswParams {
        ef_construction: 16,
        ef_search: 16,
        ..HnswParams::with_m(2 + usize::from(mode >> 1) % 6)
    };
    let graph = Hnsw::new(dim, params).expect("valid HNSW parameters");
    let mut id = 0u32;
    while !input.is_empty() && id < 48 {
        // Components are never zero (x.5), so the vector always has a direction.
        let v: Vec<f32> = input
            .bytes(dim)
            .iter()
            .map(|&b| f32::from(b) - 127.5)
            .chain(std::iter::repeat(0.5))
            .take(dim)
            .collect();
        graph.insert(NodeId(id), &v).expect("Hnsw::insert");
        if input.u8() & 7 == 0 {
            // Ids are sparse: half of `id` may not exist, which is an `InvalidArgument`.
            let _ = graph.mark_deleted(NodeId(id / 2));
        }
        id += 1 + u32::from(input.u8() % 3);
    }
    let mut bytes = Vec::new();
    graph.write_to(&mut bytes).expect("Hnsw::write_to");
    let loaded = Hnsw::read_from(&bytes, &fuzz_path("graph")).expect("a written graph must load");
    let mut again = Vec::new();
    loaded.write_to(&mut again).expect("Hnsw::write_to");
    assert!(again == bytes, "graph file round trip");
}

fn reseal_graph(bytes: &mut [u8]) {
    let Some(body_len) = bytes.len().checked_sub(4) else {
        return;
    };
    let (body, trailer) = bytes.split_at_mut(body_len);
    trailer.copy_from_slice(&codec::mask_crc(codec::crc32c(body)).to_le_bytes());
}

fn check_graph(bytes: &[u8]) {
    let path = fuzz_path("graph");
    let Some(graph) = expect_corruption(Hnsw::read_from(bytes, &path), "Hnsw::read_from") else {
        return;
    };
    let mut out = Vec::new();
    graph.write_to(&mut out).expect("Hnsw::write_to");
    let again = Hnsw::read_from(&out, &path).expect("a graph written from a loaded graph loads");
    let mut out2 = Vec::new();
    again.write_to(&mut out2).expect("Hnsw::write_to");
    assert!(out == out2, "graph rewrite is not a fixed point");
    let mut query = vec![0.0f32; graph.dim()];
    if let Some(q) = query.first_mut() {
        *q = 1.0;
    }
    let hits = graph
        .search(&query, 4, Some(8), None)
        .expect("search of a loaded graph");
    assert!(hits.len() <= 4, "search returned more than k");
    for h in &hits {
        assert!(
            graph.contains(h.id) && !graph.is_deleted(h.id),
            "search hit"
        );
    }
    let bound = graph.id_bound();
    if let Ok(id) = u32::try_from(bound) {
        graph
            .insert(NodeId(id), &query)
            .expect("insert into a loaded graph");
    }
}

// ---------------------------------------------------------------------------------------
// vector_value

/// The semantic layer's two value codecs (`semantic/value.rs`): a stored value or a vector
/// value that decodes re-encodes to the same bytes, and an encoded one decodes to what went
/// in.
pub fn vector_value(data: &[u8]) {
    if let Some((hash, node, v)) = decode_stored(data) {
        assert_eq!(
            encode_stored(hash, node, &v),
            data,
            "stored value round trip"
        );
    }
    let mut d = Decoder::new(data);
    let hash = d.u64("hash").unwrap_or(0);
    let node = d.u32("node").unwrap_or(0);
    let v: Vec<f32> = d
        .remaining()
        .chunks_exact(4)
        .filter_map(codec::get_u32)
        .map(f32::from_bits)
        .collect();
    let bytes = encode_stored(hash, node, &v);
    let (h2, n2, v2) = decode_stored(&bytes).expect("an encoded value decodes");
    assert_eq!((h2, n2), (hash, node), "stored value header");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&v2), bits(&v), "stored value components");

    if let Some(Ok(value)) = decode_vector_value(data) {
        assert_eq!(
            encode_vector_value(&value.vector, value.payload),
            data,
            "vector value round trip"
        );
    }
    let back = encode_vector_value(&v, data);
    let decoded = decode_vector_value(&back)
        .expect("a vector value has its tag")
        .expect("an encoded vector value decodes");
    assert_eq!(bits(&decoded.vector), bits(&v), "vector value components");
    assert_eq!(decoded.payload, data, "vector value payload");
}

/// Valid inputs for `vector_graph` and `vector_value`, made by the layer's own encoders.
pub(super) fn seeds(target: &str) -> Vec<Vec<u8>> {
    let with_mode = |m: u8, rest: &[u8]| {
        let mut v = vec![m];
        v.extend_from_slice(rest);
        v
    };
    let structured: Vec<u8> = (0u8..=255).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
    match target {
        "vector_graph" => {
            let graph = Hnsw::new(3, HnswParams::with_m(4)).expect("valid parameters");
            for i in 0..12u32 {
                let x = i as f32;
                let _ = graph.insert(NodeId(i), &[x.sin(), x.cos(), 0.5]);
            }
            let _ = graph.mark_deleted(NodeId(3));
            let mut file = Vec::new();
            let _ = graph.write_to(&mut file);
            vec![
                with_mode(0, &file),
                with_mode(2, &file),
                with_mode(1, &structured),
                with_mode(5, &structured),
            ]
        }
        "vector_value" => vec![
            encode_stored(42, 7, &[0.5, -0.25, 1.0]),
            encode_stored(1, 0, &[]),
            encode_stored(u64::MAX, u32::MAX, &[f32::NAN]),
            encode_vector_value(&[0.5, -0.25], b"payload"),
            encode_vector_value(&[], b""),
        ],
        _ => Vec::new(),
    }
}
