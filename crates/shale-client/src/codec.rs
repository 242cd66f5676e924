//! The gRPC codec of every service and client: prost's encoding, and a decoder that counts
//! a message's fields before it decodes anything.
//!
//! A protobuf message of a few bytes per element can decode into many times its size: a
//! `BatchRequest` of 1 MiB holding empty `Op`s is half a million of them, each a struct
//! with two vectors, tens of MiB, all allocated before a service could count them. So the
//! decoder first walks the message's top-level fields (tags and lengths only, nothing
//! copied) and refuses, with `RESOURCE_EXHAUSTED`, a message of more than
//! [`MAX_FIELDS`]; what is left to decode is bounded by the message's bytes (tonic refuses
//! a message longer than the service's limit from its length prefix, before reading it)
//! and by that count.
//!
//! No message of the protocol needs more fields: a batch holds at most
//! [`crate::wire::MAX_OPS_PER_COMMAND`] operations, a scan page and a search at most
//! 10,000 pairs or hits, an `AppendEntries` at most 8,192 entries (the server's
//! `network::MAX_APPEND_ENTRIES`), a vector (even unpacked) at most 4,096 floats (its
//! `command::MAX_INDEX_DIM`).

use std::marker::PhantomData;

use prost::bytes::Buf;
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, ProstCodec};
use tonic::Status;

/// The most top-level fields a message may hold (a repeated field counts once per element
/// when unpacked, once in all when packed).
pub const MAX_FIELDS: usize = 16_384;

/// prost's codec, with the field count checked before decoding. Named in `build.rs` as
/// the codec of every generated service and client.
#[derive(Debug, Clone, Copy)]
pub struct CheckedCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for CheckedCodec<T, U> {
    fn default() -> Self {
        CheckedCodec(PhantomData)
    }
}

impl<T, U> Codec for CheckedCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = CheckedDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::default().encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        CheckedDecoder(PhantomData)
    }
}

/// Decodes a `U` once its field count is known to be within [`MAX_FIELDS`].
#[derive(Debug)]
pub struct CheckedDecoder<U>(PhantomData<U>);

impl<U: Message + Default> Decoder for CheckedDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        // tonic hands over one whole message, contiguous.
        let fields = count_fields(buf.chunk(), MAX_FIELDS)?;
        if fields > MAX_FIELDS {
            return Err(Status::resource_exhausted(format!(
                "a message of more than {MAX_FIELDS} fields"
            )));
        }
        U::decode(buf)
            .map(Some)
            .map_err(|e| Status::invalid_argument(format!("a malformed message: {e}")))
    }
}

/// The number of top-level fields in the protobuf message `bytes`, counting no further
/// than `limit + 1`; `INVALID_ARGUMENT` if the bytes are not a sequence of fields.
pub fn count_fields(mut bytes: &[u8], limit: usize) -> Result<usize, Status> {
    let malformed = |what: &str| Status::invalid_argument(format!("a malformed message: {what}"));
    let mut fields = 0;
    while !bytes.is_empty() && fields <= limit {
        let key = prost::encoding::decode_varint(&mut bytes).map_err(|_| malformed("a key"))?;
        if key >> 3 == 0 {
            return Err(malformed("field number 0"));
        }
        let skip = match key & 7 {
            0 => {
                prost::encoding::decode_varint(&mut bytes).map_err(|_| malformed("a varint"))?;
                0
            }
            1 => 8,
            2 => {
                let len = prost::encoding::decode_varint(&mut bytes)
                    .map_err(|_| malformed("a length"))?;
                usize::try_from(len).map_err(|_| malformed("a length"))?
            }
            5 => 4,
            _ => return Err(malformed("a wire type")),
        };
        bytes = bytes
            .get(skip..)
            .ok_or_else(|| malformed("a field past the end"))?;
        fields += 1;
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb;

    fn fields_of(m: &impl Message) -> Result<usize, Status> {
        count_fields(&m.encode_to_vec(), MAX_FIELDS)
    }

    #[test]
    fn fields_are_counted_at_the_top_level_only() {
        let batch = pb::BatchRequest {
            ops: vec![
                pb::Op {
                    key: b"k".to_vec(),
                    ..Default::default()
                };
                3
            ],
            session: None,
        };
        assert_eq!(fields_of(&batch).expect("well formed"), 3);
        let search = pb::SearchRequest {
            vector: vec![0.5; 384],
            ..Default::default()
        };
        // A packed repeated field is one field.
        assert_eq!(fields_of(&search).expect("well formed"), 1);
        assert_eq!(count_fields(&[], MAX_FIELDS).expect("empty"), 0);
    }

    #[test]
    fn a_message_of_many_small_fields_is_counted_no_further_than_the_limit() {
        let bomb = pb::BatchRequest {
            ops: vec![pb::Op::default(); 100_000],
            session: None,
        };
        let bytes = bomb.encode_to_vec();
        assert_eq!(bytes.len(), 200_000, "two bytes an operation");
        assert_eq!(count_fields(&bytes, 10).expect("well formed"), 11);
    }

    #[test]
    fn bytes_that_are_not_fields_are_refused() {
        for bad in [
            &[0x08][..],         // a varint field without its value
            &[0x0a, 0x05, 1, 2], // a length past the end
            &[0x0b],             // wire type 3 (a group)
            &[0x00, 0x00],       // field number 0
            &[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ], // a key too long
            &[0x09, 1, 2, 3],    // a fixed64 cut short
        ] {
            let e = count_fields(bad, MAX_FIELDS).expect_err("refused");
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad:?}");
        }
    }
}
