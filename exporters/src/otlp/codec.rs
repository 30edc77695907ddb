//! Client codec: writes a batch's received bytes when nothing changed them,
//! and encodes straight into the gRPC buffer otherwise.

use std::sync::Arc;

use bytes::BufMut;
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

use profcol_pipeline::proto::ExportProfilesServiceResponse;
use profcol_pipeline::ProfileBatch;

#[derive(Default)]
pub struct BatchCodec;

impl Codec for BatchCodec {
    type Encode = Arc<ProfileBatch>;
    type Decode = ExportProfilesServiceResponse;
    type Encoder = BatchEncoder;
    type Decoder = ResponseDecoder;

    fn encoder(&mut self) -> BatchEncoder {
        BatchEncoder
    }

    fn decoder(&mut self) -> ResponseDecoder {
        ResponseDecoder
    }
}

pub struct BatchEncoder;

impl Encoder for BatchEncoder {
    type Item = Arc<ProfileBatch>;
    type Error = Status;

    fn encode(&mut self, item: Arc<ProfileBatch>, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        match item.encoded() {
            Some(bytes) => {
                buf.put_slice(bytes);
                Ok(())
            }
            None => item
                .data()
                .encode(buf)
                .map_err(|e| Status::internal(format!("encoding the request: {e}"))),
        }
    }
}

pub struct ResponseDecoder;

impl Decoder for ResponseDecoder {
    type Item = ExportProfilesServiceResponse;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        ExportProfilesServiceResponse::decode(src)
            .map(Some)
            .map_err(|e| Status::internal(format!("decoding the response: {e}")))
    }
}
