//! A gRPC codec that keeps the request bytes next to the decoded request,
//! so a batch nobody mutates is forwarded without re-encoding.

use std::marker::PhantomData;

use bytes::{Buf, Bytes};
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;

use profcol_pipeline::proto::{ExportProfilesServiceResponse, ProfilesData};

/// A decoded request and the exact bytes it came from. A decode error is
/// carried to the handler, which counts it and answers `INVALID_ARGUMENT`.
pub struct Received {
    pub data: Result<ProfilesData, String>,
    pub bytes: Bytes,
}

#[derive(Default)]
pub struct ExportCodec(PhantomData<()>);

impl Codec for ExportCodec {
    type Encode = ExportProfilesServiceResponse;
    type Decode = Received;
    type Encoder = ResponseEncoder;
    type Decoder = RequestDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        ResponseEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        RequestDecoder
    }
}

pub struct ResponseEncoder;

impl Encoder for ResponseEncoder {
    type Item = ExportProfilesServiceResponse;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(buf)
            .map_err(|e| Status::internal(format!("encoding the response: {e}")))
    }
}

pub struct RequestDecoder;

impl Decoder for RequestDecoder {
    type Item = Received;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Received>, Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        // `ExportProfilesServiceRequest` and `ProfilesData` share their wire
        // format; decoding as `ProfilesData` saves a move later.
        let data = ProfilesData::decode(bytes.clone()).map_err(|e| decode_error(bytes.len(), &e));
        Ok(Some(Received { data, bytes }))
    }
}

/// The message of a request that does not decode; prost names the field path
/// from the type decoded, which the sender knows as the request.
fn decode_error(len: usize, e: &prost::DecodeError) -> String {
    let e = e
        .to_string()
        .replacen(" ProfilesData.", " ExportProfilesServiceRequest.", 1);
    format!("cannot decode ExportProfilesServiceRequest ({len} bytes): {e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_errors_name_the_request_type() {
        // resource_profiles[0] holds a truncated varint.
        let bytes = [0x0a, 0x02, 0x08, 0xff];
        let e = ProfilesData::decode(&bytes[..]).unwrap_err();
        let msg = decode_error(bytes.len(), &e);
        assert!(
            msg.starts_with("cannot decode ExportProfilesServiceRequest (4 bytes): ")
                && msg.contains("ExportProfilesServiceRequest.resource_profiles: ")
                && !msg.contains("ProfilesData"),
            "{msg}"
        );
    }
}
