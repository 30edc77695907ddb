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

/// `small` (1k samples), `medium` (100k samples, ~2 MB), `large` (400k
/// samples), or the path of an `ExportProfilesServiceRequest` file.
pub fn payload(spec: &str) -> anyhow::Result<Payload> {
    let data = match spec {
        "small" => synth::request(1_000, 500),
        "medium" => synth::request(100_000, 20_000),
        // 1e6 samples of one value each (~7 MB).
        "one-value" => synth::Config {
            samples: 1_000_000,
            timestamps: false,
            ..Default::default()
        }
        .build(),
        "large" => synth::Config {
            samples: 400_000,
            stacks: 60_000,
            functions: 8_000,
            ..Default::default()
        }
        .build(),
        path => {
            let bytes = std::fs::read(path)?;
            let data = profcol_model::proto::ProfilesData::decode(&bytes[..])?;
            let samples = profcol_model::ProfileBatch::new(data).sample_count();
            return Ok(Payload {
                bytes: bytes.into(),
                samples,
            });
        }
    };
    let samples = profcol_model::ProfileBatch::new(data.clone()).sample_count();
    Ok(Payload {
        bytes: data.encode_to_vec().into(),
        samples,
    })
}
