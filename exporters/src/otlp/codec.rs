//! Client codec: writes a batch's received bytes when nothing changed them,
//! and encodes straight into the gRPC buffer otherwise, in the proto
//! revision the peer reads; or writes a request already encoded.

use std::sync::Arc;

use bytes::BufMut;
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

use profcol_model::proto::ExportProfilesServiceResponse;
use profcol_model::ProfileBatch;
use profcol_otlp::revisions::{encode_as, Revision};

pub(super) struct BatchCodec(pub Revision);

/// What one export sends.
#[derive(Clone)]
pub enum Body {
    Batch(Arc<ProfileBatch>),
    /// An `ExportProfilesServiceRequest` encoded in the current revision.
    Encoded(bytes::Bytes),
    /// Nothing: the request carries a [`super::compress::Prebuilt`]
    /// message, which the compression layer frames instead.
    Prebuilt,
}

impl Codec for BatchCodec {
    type Encode = Body;
    type Decode = ExportProfilesServiceResponse;
    type Encoder = BatchEncoder;
    type Decoder = ResponseDecoder;

    fn encoder(&mut self) -> BatchEncoder {
        BatchEncoder(self.0)
    }

    fn decoder(&mut self) -> ResponseDecoder {
        ResponseDecoder
    }
}

pub(super) struct BatchEncoder(Revision);

impl Encoder for BatchEncoder {
    type Item = Body;
    type Error = Status;

    fn encode(&mut self, item: Body, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        let revision = self.0;
        let item = match item {
            Body::Batch(batch) => batch,
            Body::Prebuilt => return Ok(()),
            Body::Encoded(bytes) if revision == Revision::CURRENT => {
                buf.put_slice(&bytes);
                return Ok(());
            }
            Body::Encoded(_) => {
                return Err(Status::internal(format!(
                    "an encoded request cannot be sent to a {} peer",
                    revision.as_str()
                )))
            }
        };
        match item.encoded() {
            // Received bytes are always v1.10.0's.
            Some(bytes) if revision == Revision::CURRENT => {
                buf.put_slice(bytes);
                Ok(())
            }
            // Into a vector first, then one copy: prost writing field by
            // field through `BytesMut::put_slice` (a call per field) costs
            // more than the extra copy.
            _ if revision == Revision::CURRENT => {
                buf.put_slice(&profcol_model::codec::encode(item.data()));
                Ok(())
            }
            _ => {
                encode_as(item.data(), revision, buf)
                    .map_err(|e| Status::internal(format!("encoding the request: {e}")))?
                    .warn(revision);
                Ok(())
            }
        }
    }
}

pub(super) struct ResponseDecoder;

impl Decoder for ResponseDecoder {
    type Item = ExportProfilesServiceResponse;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        ExportProfilesServiceResponse::decode(src)
            .map(Some)
            .map_err(|e| Status::internal(format!("decoding the response: {e}")))
    }
}
