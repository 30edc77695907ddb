//! The requests sent: synthetic OTLP profiles of three sizes (realistically
//! shaped, see `profcol_model::synth`) or a file.

use bytes::Bytes;
use prost::Message;

use profcol_model::synth;

/// One request as sent: its protobuf bytes and its number of samples.
#[derive(Clone)]
pub struct Payload {
    pub bytes: Bytes,
    pub samples: u64,
}

/// A size of [`synth::sized`] (`small`, `medium`, `large`, `one-value`), or
/// the path of an `ExportProfilesServiceRequest` file.
pub fn payload(spec: &str) -> anyhow::Result<Payload> {
    let Some(data) = synth::sized(spec) else {
        let bytes = std::fs::read(spec)?;
        let data = profcol_model::proto::ProfilesData::decode(&bytes[..])?;
        let samples = profcol_model::ProfileBatch::new(data).sample_count();
        return Ok(Payload {
            bytes: bytes.into(),
            samples,
        });
    };
    let samples = profcol_model::ProfileBatch::new(data.clone()).sample_count();
    Ok(Payload {
        bytes: data.encode_to_vec().into(),
        samples,
    })
}
