//! Index definitions (docs/format.md, "Index definition"): the spec of a replicated
//! index, in a `DefineIndex` command and as the value of its [`index_key`](super::index_key).

use shale::inspect::codec::{self, Decoder};
use shale_search::vector::Metric;
use shale_search::Analyzer;

use super::fields::{decoded, finish, RECORD_VERSION};
use crate::command::{IndexModel, IndexSpec};
use crate::error::Result;

const METRIC_COSINE: u8 = 0;
const METRIC_DOT: u8 = 1;
const METRIC_L2: u8 = 2;
const MODEL_VECTORS: u8 = 0;
const MODEL_HASH: u8 = 1;
const MODEL_MINILM: u8 = 2;
/// The version of an index definition record whose spec has keywords.
const DEFINITION_VERSION_KEYWORDS: u8 = 2;
const KEYWORDS_SIMPLE: u8 = 1;
const KEYWORDS_ENGLISH: u8 = 2;
const KEYWORDS_CJK: u8 = 3;

/// `spec := name:varbytes prefix:varbytes dim:varint metric:u8 model:u8 [keywords:u8]`:
/// `keywords` (the analyzer of the index's keyword index) is there when the record says so,
/// by its command kind (5, not 4) or its version (2, not 1), so a spec without one has the
/// bytes it had before keyword indexes, and a cut one is never read as another.
pub(super) fn put_index_spec(out: &mut Vec<u8>, spec: &IndexSpec) {
    codec::put_length_prefixed(out, spec.name.as_bytes());
    codec::put_length_prefixed(out, &spec.prefix);
    codec::put_varint(out, u64::from(spec.dim));
    codec::put_u8(
        out,
        match spec.metric {
            Metric::Cosine => METRIC_COSINE,
            Metric::Dot => METRIC_DOT,
            Metric::L2 => METRIC_L2,
        },
    );
    codec::put_u8(
        out,
        match spec.model {
            IndexModel::Vectors => MODEL_VECTORS,
            IndexModel::Hash => MODEL_HASH,
            IndexModel::MiniLm => MODEL_MINILM,
        },
    );
    if let Some(analyzer) = spec.keywords {
        codec::put_u8(
            out,
            match analyzer {
                Analyzer::Simple => KEYWORDS_SIMPLE,
                Analyzer::English => KEYWORDS_ENGLISH,
                Analyzer::Cjk => KEYWORDS_CJK,
            },
        );
    }
}

/// A spec, with its `keywords` byte when `with_keywords`.
pub(super) fn get_index_spec(
    d: &mut Decoder<'_>,
    with_keywords: bool,
) -> Result<IndexSpec, codec::DecodeError> {
    let name = d.length_prefixed("index name")?;
    let name = std::str::from_utf8(name)
        .map_err(|_| codec::DecodeError::new(d.position(), "index name is not UTF-8"))?
        .to_owned();
    let prefix = d.length_prefixed("index prefix")?.to_vec();
    let dim = d.varint_u32("index dimension")?;
    let metric = match d.u8("metric")? {
        METRIC_COSINE => Metric::Cosine,
        METRIC_DOT => Metric::Dot,
        METRIC_L2 => Metric::L2,
        other => {
            return Err(codec::DecodeError::new(
                d.position(),
                format!("metric {other}"),
            ))
        }
    };
    let model = match d.u8("model")? {
        MODEL_VECTORS => IndexModel::Vectors,
        MODEL_HASH => IndexModel::Hash,
        MODEL_MINILM => IndexModel::MiniLm,
        other => {
            return Err(codec::DecodeError::new(
                d.position(),
                format!("model {other}"),
            ))
        }
    };
    let keywords = match with_keywords {
        false => None,
        true => match d.u8("keywords")? {
            KEYWORDS_SIMPLE => Some(Analyzer::Simple),
            KEYWORDS_ENGLISH => Some(Analyzer::English),
            KEYWORDS_CJK => Some(Analyzer::Cjk),
            other => {
                return Err(codec::DecodeError::new(
                    d.position(),
                    format!("keyword analyzer {other}"),
                ))
            }
        },
    };
    Ok(IndexSpec {
        name,
        prefix,
        dim,
        metric,
        model,
        keywords,
    })
}

/// `index_definition := version:u8 spec`, the value of [`index_key`](super::index_key): version 1 for a spec
/// without keywords, 2 for one with.
pub fn encode_index_definition(spec: &IndexSpec) -> Vec<u8> {
    let mut out = Vec::new();
    let version = match spec.keywords {
        Some(_) => DEFINITION_VERSION_KEYWORDS,
        None => RECORD_VERSION,
    };
    codec::put_u8(&mut out, version);
    put_index_spec(&mut out, spec);
    out
}

/// Inverse of [`encode_index_definition`].
///
/// # Errors
/// `Corruption` for bytes that are not an index definition.
pub fn decode_index_definition(bytes: &[u8]) -> Result<IndexSpec> {
    let mut d = Decoder::new(bytes);
    let spec = match d.u8("index definition") {
        Ok(RECORD_VERSION) => get_index_spec(&mut d, false),
        Ok(DEFINITION_VERSION_KEYWORDS) => get_index_spec(&mut d, true),
        Ok(v) => Err(codec::DecodeError::new(
            0,
            format!("index definition: unknown version {v}"),
        )),
        Err(e) => Err(e),
    };
    decoded(
        "index definition",
        spec.and_then(|spec| finish(&d, "index definition", spec)),
    )
}
