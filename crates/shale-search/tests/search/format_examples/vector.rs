//! Sections 8 to 11 of docs/format.md: the vector store's values, the HNSW graph file, the
//! model file and the vector value.

use std::path::Path;

use shale::inspect::codec;
use shale::Error;
use shale_search::semantic::{VectorIndexDefinition, MODEL_FORMAT_VERSION, MODEL_MAGIC};
use shale_search::vector::{
    Hnsw, HnswParams, NodeId, GRAPH_FORMAT_VERSION, GRAPH_HEADER_LEN, GRAPH_MAGIC,
};

use super::hex;

// ---------------------------------------------------------------------------------------
// Section 8: the vector store's values.

#[test]
fn vector_value_example() {
    let bytes = hex("vector-value-example");
    let hash = shale_search::semantic::value_hash(b"a cat");
    let (got_hash, node, vector) = shale_search::semantic::decode_stored(&bytes).unwrap();
    assert_eq!(got_hash, hash);
    assert_eq!(node, 3);
    assert_eq!(vector, vec![0.6f32, 0.8]);
    assert_eq!(
        shale_search::semantic::encode_stored(hash, 3, &[0.6, 0.8]),
        bytes
    );
    assert_eq!(
        shale_search::semantic::decode_stored(&bytes[..bytes.len() - 1]),
        None,
        "a length that does not match the dimension"
    );
}

// ---------------------------------------------------------------------------------------
// Section 11: the vector value.

#[test]
fn vector_record_example() {
    let bytes = hex("vector-record-example");
    let value = shale_search::semantic::decode_vector_value(&bytes)
        .expect("starts with the tag")
        .expect("decodes");
    assert_eq!(value.vector, [1.5f32, -2.0]);
    assert_eq!(value.payload, b"hi");
    assert_eq!(
        shale_search::semantic::vector_value(&[1.5, -2.0], b"hi"),
        bytes
    );
    assert_eq!(bytes[0], shale_search::semantic::VECTOR_VALUE_TAG);
    assert!(std::str::from_utf8(&bytes).is_err(), "never UTF-8 text");
    // Cut inside the components: malformed, and so refused by an index.
    assert!(shale_search::semantic::decode_vector_value(&bytes[..9])
        .expect("starts with the tag")
        .is_err());
}

// ---------------------------------------------------------------------------------------
// The HNSW graph file (docs/format.md section 9).

/// The tiny graph of the document: four unit vectors in two dimensions inserted in id order
/// with `m = 2`, then node 3 tombstoned.
fn hnsw_example_graph(seed: u64) -> Hnsw {
    let params = HnswParams {
        ef_construction: 8,
        ef_search: 8,
        seed,
        ..HnswParams::with_m(2)
    };
    let g = Hnsw::new(2, params).unwrap();
    for (id, v) in HNSW_EXAMPLE_VECTORS.iter().enumerate() {
        g.insert(NodeId(id as u32), v).unwrap();
    }
    g.mark_deleted(NodeId(3)).unwrap();
    g
}

const HNSW_EXAMPLE_VECTORS: [[f32; 2]; 4] = [[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [-0.8, 0.6]];
const HNSW_EXAMPLE_SEED: u64 = 4;

fn hnsw_bytes(g: &Hnsw) -> Vec<u8> {
    let mut out = Vec::new();
    g.write_to(&mut out).unwrap();
    out
}

#[test]
fn hnsw_graph_example() {
    let doc = hex("hnsw-example");
    assert_eq!(
        hnsw_bytes(&hnsw_example_graph(HNSW_EXAMPLE_SEED)),
        doc,
        "the engine no longer writes the document's bytes"
    );
    assert_eq!(doc.len(), 190);
    assert_eq!(codec::get_u64(&doc).unwrap(), GRAPH_MAGIC);
    assert_eq!(&doc[..8], b"WNHELAHS");
    assert_eq!(codec::get_u32(&doc[8..]).unwrap(), GRAPH_FORMAT_VERSION);
    let crc = codec::get_u32(&doc[doc.len() - 4..]).unwrap();
    assert_eq!(codec::unmask_crc(crc), codec::crc32c(&doc[..doc.len() - 4]));

    let g = Hnsw::read_from(&doc, Path::new("example.hnsw")).unwrap();
    let p = g.params();
    assert_eq!(
        (
            g.dim(),
            p.m,
            p.m_max,
            p.m_max0,
            p.ef_construction,
            p.ef_search
        ),
        (2, 2, 2, 4, 8, 8)
    );
    assert_eq!(p.ml, 1.0 / 2f64.ln());
    assert_eq!(p.seed, HNSW_EXAMPLE_SEED);
    assert_eq!((g.len(), g.deleted_count()), (4, 1));
    assert_eq!(g.entry_point(), Some(NodeId(0)));
    let levels: Vec<u8> = (0..4).map(|i| g.level(NodeId(i)).unwrap()).collect();
    assert_eq!(levels, [1, 0, 0, 1]);
    let n = |id: u32, level: u8| -> Vec<u32> {
        g.neighbours(NodeId(id), level)
            .iter()
            .map(|n| n.0)
            .collect()
    };
    assert_eq!(n(0, 0), [1, 2]);
    assert_eq!(n(0, 1), [3]);
    assert_eq!(n(1, 0), [0, 2]);
    assert_eq!(n(2, 0), [1, 0, 3]);
    assert_eq!(n(3, 0), [2]);
    assert_eq!(n(3, 1), [0]);
    assert!(g.is_deleted(NodeId(3)));
    assert_eq!(g.metric(), shale_search::vector::Metric::Cosine);
    // Node 1's code: (0.6, 0.8) at the scale 0.8 / 127 is 95 and 127, stored plus 128.
    let code = g.code(NodeId(1)).unwrap();
    assert_eq!(&code[..4], [0xdf, 0xff, 0, 0]);
    assert_eq!(
        f32::from_le_bytes(code[4..8].try_into().unwrap()),
        0.8 / 127.0
    );
    assert_eq!(f32::from_le_bytes(code[8..12].try_into().unwrap()), 1.0);
    let back = g.decoded(NodeId(1)).unwrap();
    assert!(
        (back[0] - 0.6).abs() < 0.8 / 254.0 && back[1] == 0.8,
        "{back:?}"
    );
    // The tombstone is walked through, never returned.
    let found = g.search(&[-1.0, 0.0], 4, None, None).unwrap();
    let ids: Vec<u32> = found.iter().map(|r| r.id.0).collect();
    assert_eq!(ids, [2, 1, 0]);

    // The document's claims about damage.
    let mut flipped = doc.clone();
    flipped[100] ^= 0x01;
    let err = Hnsw::read_from(&flipped, Path::new("example.hnsw")).unwrap_err();
    assert!(
        matches!(err, Error::Corruption { offset: 186, .. }),
        "{err}"
    );
    let err = Hnsw::read_from(&doc[..189], Path::new("example.hnsw")).unwrap_err();
    assert!(err.is_corruption(), "{err}");
}

#[test]
#[ignore = "prints the HNSW example for docs/format.md"]
fn print_hnsw_example() {
    for seed in 0..8 {
        let g = hnsw_example_graph(seed);
        let levels: Vec<u8> = (0..4).map(|i| g.level(NodeId(i)).unwrap()).collect();
        println!("seed {seed}: levels {levels:?} entry {:?}", g.entry_point());
    }
    let g = hnsw_example_graph(HNSW_EXAMPLE_SEED);
    let bytes = hnsw_bytes(&g);
    println!("```hex hnsw-example");
    println!("# header");
    let mut at = GRAPH_HEADER_LEN;
    for line in bytes[..at].chunks(16) {
        let hex: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
        println!("{}", hex.join(" "));
    }
    for id in 0..4u32 {
        let level = g.level(NodeId(id)).unwrap();
        let lists: usize = (0..=level)
            .map(|l| 1 + 4 * g.neighbours(NodeId(id), l).len())
            .sum();
        let len = 4 + 1 + 1 + shale_search::vector::quant::code_len(2) + lists;
        println!("# node {id} at offset {at}");
        let hex: Vec<String> = bytes[at..at + len]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        println!("{}", hex.join(" "));
        at += len;
    }
    println!("# trailer at offset {at}");
    let hex: Vec<String> = bytes[at..].iter().map(|b| format!("{b:02x}")).collect();
    println!("{}", hex.join(" "));
    println!("```");
}

// ---------------------------------------------------------------------------------------
// Section 10: the model file.

/// Two dimensions, model id "toy-v1": the document's example embedder.
#[derive(Debug)]
struct Toy;

impl shale_search::semantic::Embedder for Toy {
    fn dim(&self) -> usize {
        2
    }

    fn model_id(&self) -> String {
        "toy-v1".into()
    }

    fn embed(&self, texts: &[&str]) -> shale::Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|_| vec![0.6, 0.8]).collect())
    }
}

#[test]
fn model_file_example() {
    let doc = hex("model-example");
    let definition = VectorIndexDefinition::decode(&doc).unwrap();
    assert_eq!(
        definition,
        VectorIndexDefinition {
            dim: 2,
            model_id: "toy-v1".into(),
            prefix: b"docs/".to_vec(),
            keyspace: None,
            hnsw: HnswParams::with_m(16),
        }
    );
    assert_eq!(definition.encode().unwrap(), doc);
    assert_eq!(codec::get_u64(&doc).unwrap(), MODEL_MAGIC);
    assert_eq!(&doc[..8], b"DOMELAHS");
    assert_eq!(codec::get_u32(&doc[8..]).unwrap(), MODEL_FORMAT_VERSION);
    assert_eq!(doc.len(), 70);
    let crc = codec::get_u32(&doc[66..]).unwrap();
    assert_eq!(codec::unmask_crc(crc), codec::crc32c(&doc[..66]));

    // The engine writes exactly these bytes for a store made with that embedder.
    let dir = tempfile::tempdir().unwrap();
    let db = std::sync::Arc::new(shale::Db::open(dir.path(), shale::Options::default()).unwrap());
    let index = shale_search::semantic::VectorIndex::open(
        &db,
        "toy",
        shale_search::semantic::VectorIndexOptions::text(std::sync::Arc::new(Toy)).prefix("docs/"),
    )
    .unwrap();
    drop(index);
    db.close().unwrap();
    let written =
        std::fs::read(shale_search::semantic::index_dir(dir.path(), "toy").join("MODEL")).unwrap();
    assert_eq!(
        written, doc,
        "the engine no longer writes the document's bytes"
    );
}
