//! `POST /push.v1.PusherService/Push`: Pyroscope's Push RPC as a Connect
//! unary call (what pyroscope-io 1.x, pyroscope-rs clients and Alloy's
//! `pyroscope.write` send). The body is the bare `push.v1.PushRequest`, in
//! protobuf (`application/proto`) or the proto3 JSON mapping
//! (`application/json`); success is 200 with an empty `PushResponse`.

use base64::Engine;
use bytes::Bytes;
use prost::Message;

/// `push.v1.PushRequest` (api/push/v1/push.proto).
#[derive(Clone, PartialEq, Message)]
pub struct PushRequest {
    #[prost(message, repeated, tag = "1")]
    pub series: Vec<RawProfileSeries>,
}

/// `push.v1.RawProfileSeries`; its `annotations` (field 3) are skipped.
#[derive(Clone, PartialEq, Message)]
pub struct RawProfileSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<LabelPair>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<RawSample>,
}

/// `types.v1.LabelPair`.
#[derive(Clone, PartialEq, Message)]
pub struct LabelPair {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `push.v1.RawSample`: a pprof, gzip'd or not, and its id (a UUID).
#[derive(Clone, PartialEq, Message)]
pub struct RawSample {
    #[prost(bytes = "bytes", tag = "1")]
    pub raw_profile: Bytes,
    #[prost(string, tag = "2")]
    pub id: String,
}

/// The two codecs of a Connect unary call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Proto,
    Json,
}

impl Codec {
    /// From `Content-Type`; parameters (`; charset=utf-8`) are ignored.
    pub fn of(content_type: Option<&str>) -> Option<Self> {
        let mime = content_type?.split(';').next()?.trim();
        if mime.eq_ignore_ascii_case("application/proto") {
            Some(Self::Proto)
        } else if mime.eq_ignore_ascii_case("application/json") {
            Some(Self::Json)
        } else {
            None
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Self::Proto => "application/proto",
            Self::Json => "application/json",
        }
    }

    /// The body of an empty `PushResponse`.
    pub fn empty_response(self) -> &'static [u8] {
        match self {
            Self::Proto => b"",
            Self::Json => b"{}",
        }
    }
}

/// The content types Push takes, for `Accept-Post`.
pub const ACCEPTED: &str = "application/json, application/proto";

/// Decodes the request in `codec`; the raw profiles of a protobuf request
/// are slices of `body`.
pub fn decode(body: Bytes, codec: Codec) -> Result<PushRequest, String> {
    match codec {
        Codec::Proto => {
            PushRequest::decode(body).map_err(|e| format!("cannot decode push.v1.PushRequest: {e}"))
        }
        Codec::Json => decode_json(&body),
    }
}

/// The proto3 JSON mapping: lowerCamelCase names (the proto names are
/// read too), bytes in base64 (standard or URL-safe, padded or not),
/// unknown fields ignored.
fn decode_json(body: &[u8]) -> Result<PushRequest, String> {
    #[derive(serde::Deserialize)]
    struct Req {
        #[serde(default)]
        series: Vec<Series>,
    }
    #[derive(serde::Deserialize)]
    struct Series {
        #[serde(default)]
        labels: Vec<Label>,
        #[serde(default)]
        samples: Vec<Sample>,
    }
    #[derive(serde::Deserialize)]
    struct Label {
        #[serde(default)]
        name: String,
        #[serde(default)]
        value: String,
    }
    #[derive(serde::Deserialize)]
    struct Sample {
        #[serde(default, rename = "rawProfile", alias = "raw_profile")]
        raw_profile: String,
        #[serde(default, rename = "ID", alias = "id")]
        id: String,
    }
    let req: Req = serde_json::from_slice(body)
        .map_err(|e| format!("cannot decode push.v1.PushRequest from JSON: {e}"))?;
    let engine = |url_safe: bool| {
        let config = base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent);
        let alphabet = if url_safe {
            &base64::alphabet::URL_SAFE
        } else {
            &base64::alphabet::STANDARD
        };
        base64::engine::GeneralPurpose::new(alphabet, config)
    };
    let mut series = Vec::with_capacity(req.series.len());
    for (i, s) in req.series.into_iter().enumerate() {
        let mut samples = Vec::with_capacity(s.samples.len());
        for (j, sample) in s.samples.into_iter().enumerate() {
            let url_safe = sample.raw_profile.contains(['-', '_']);
            let raw = engine(url_safe)
                .decode(sample.raw_profile.trim())
                .map_err(|e| format!("series[{i}].samples[{j}].rawProfile is not base64: {e}"))?;
            samples.push(RawSample {
                raw_profile: raw.into(),
                id: sample.id,
            });
        }
        series.push(RawProfileSeries {
            labels: s
                .labels
                .into_iter()
                .map(|l| LabelPair {
                    name: l.name,
                    value: l.value,
                })
                .collect(),
            samples,
        });
    }
    Ok(PushRequest { series })
}

/// A Connect error code for an HTTP status, as Connect maps them back.
pub fn code_for(status: http::StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "invalid_argument",
        401 => "unauthenticated",
        403 => "permission_denied",
        404 => "unimplemented",
        408 => "deadline_exceeded",
        413 | 429 => "resource_exhausted",
        415 => "invalid_argument",
        503 => "unavailable",
        _ => "internal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_requests_decode_as_protojson_writes_them() {
        let json = br#"{"series":[{"labels":[{"name":"__name__","value":"process_cpu"}],"samples":[{"rawProfile":"AAEC","ID":"x"},{"raw_profile":"-_8","id":"y"}]}],"unknown":1}"#;
        let req = decode(Bytes::from_static(json), Codec::Json).unwrap();
        let s = &req.series[0];
        assert_eq!(s.labels[0].name, "__name__");
        assert_eq!(&s.samples[0].raw_profile[..], [0, 1, 2]);
        assert_eq!(&s.samples[1].raw_profile[..], [0xfb, 0xff]);
        assert_eq!(s.samples[1].id, "y");
        let e = decode(
            Bytes::from_static(br#"{"series":[{"samples":[{"rawProfile":"!!"}]}]}"#),
            Codec::Json,
        )
        .unwrap_err();
        assert!(e.contains("series[0].samples[0].rawProfile"), "{e}");
        assert_eq!(
            Codec::of(Some("application/json; charset=utf-8")),
            Some(Codec::Json)
        );
        assert_eq!(Codec::of(Some("application/connect+proto")), None);
    }
}
