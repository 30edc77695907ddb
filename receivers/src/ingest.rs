//! One ingest path for every transport (otelcol's otlpreceiver `Export` and
//! `internal/errors`): a request's bytes and the memory they hold in, an
//! accepted batch (perhaps with a partial success) or a [`Refusal`] out,
//! and one mapping from a refusal to a gRPC status and to an HTTP status.
//! Decoding, validation and conversion run on the blocking pool, never on
//! the threads that serve connections.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use tonic::Code;

use profcol_model::compressed::Compressed;
use profcol_model::dictionary::{retain_profiles, Lookup};
use profcol_model::footprint::estimate_decoded;
use profcol_model::memory::{Held, Reservation};
use profcol_model::proto::{ExportProfilesPartialSuccess, ProfilesData};
use profcol_model::repair::{repair, Repairs};
use profcol_model::resolved::format_value;
use profcol_model::wire_check;
use profcol_model::ProfileBatch;
use profcol_model::{findings, profile_sample_count, Findings, Problem, ValidationError};
use profcol_otlp::json as otlp_json;
use profcol_otlp::revisions::{self as otlp_revisions, Revision};
use profcol_pipeline::component::{ConsumeError, Output};
use profcol_pipeline::telemetry::Telemetry;

use crate::body::BodyError;

/// Why a request was refused: what each transport answers, the reason it
/// is counted with, and when to come back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The gRPC status; the HTTP status follows from it as in the
    /// Collector, unless `http` says otherwise.
    pub code: Code,
    pub http: Option<StatusCode>,
    pub message: String,
    /// The `reason` label of the refused samples and the request.
    pub reason: &'static str,
    /// Retryable: `RetryInfo` on gRPC, `Retry-After` on HTTP.
    pub retry_after: Option<Duration>,
}

impl Refusal {
    fn new(code: Code, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            http: None,
            message: message.into(),
            reason,
            retry_after: None,
        }
    }

    /// The request cannot be read or is not valid: the client must not
    /// send it again.
    pub fn invalid(reason: &'static str, message: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, reason, message)
    }

    /// Larger than any limit: `RESOURCE_EXHAUSTED` without `RetryInfo`
    /// (not retryable), HTTP 413.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self {
            http: Some(StatusCode::PAYLOAD_TOO_LARGE),
            ..Self::new(Code::ResourceExhausted, "too_large", message)
        }
    }

    /// Full for now (memory, a pipeline, a queue) or shutting down: retry.
    pub fn retry_later(reason: &'static str, message: impl Into<String>, after: Duration) -> Self {
        Self {
            retry_after: Some(after),
            ..Self::new(Code::Unavailable, reason, message)
        }
    }

    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(Code::Unauthenticated, "unauthorized", message)
    }

    /// The gRPC status, with `RetryInfo` when the client should retry.
    pub fn grpc_status(&self) -> tonic::Status {
        match self.retry_after {
            Some(after) => {
                use tonic_types::{ErrorDetails, StatusExt};
                tonic::Status::with_error_details(
                    self.code,
                    self.message.clone(),
                    ErrorDetails::with_retry_info(Some(after)),
                )
            }
            None => tonic::Status::new(self.code, self.message.clone()),
        }
    }

    /// The HTTP status, as the Collector's `GetHTTPStatusCodeFromStatus`.
    pub fn http_status(&self) -> StatusCode {
        if let Some(s) = self.http {
            return s;
        }
        match self.code {
            Code::Cancelled
            | Code::DeadlineExceeded
            | Code::Aborted
            | Code::OutOfRange
            | Code::Unavailable
            | Code::DataLoss => StatusCode::SERVICE_UNAVAILABLE,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            Code::InvalidArgument => StatusCode::BAD_REQUEST,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::Unimplemented => StatusCode::NOT_FOUND,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<ConsumeError> for Refusal {
    fn from(e: ConsumeError) -> Self {
        match &e {
            ConsumeError::Full {
                retry_after,
                reason,
                ..
            } => Self::retry_later(reason, e.to_string(), *retry_after),
            ConsumeError::TooLarge { .. } => Self::too_large(e.to_string()),
            ConsumeError::ShuttingDown => {
                Self::retry_later("shutdown", e.to_string(), Duration::from_secs(5))
            }
        }
    }
}

impl From<BodyError> for Refusal {
    fn from(e: BodyError) -> Self {
        match e {
            BodyError::TooLarge { limit } => Self::too_large(format!(
                "the request exceeds the size limit of {limit} bytes"
            )),
            BodyError::UnsupportedEncoding(enc) => Self {
                http: Some(StatusCode::UNSUPPORTED_MEDIA_TYPE),
                ..Self::new(
                    Code::Unimplemented,
                    "unsupported_encoding",
                    format!("unsupported content encoding {enc:?}"),
                )
            },
            BodyError::Corrupt(m) => Self::invalid("malformed", m),
            BodyError::TimedOut(m) => Self {
                http: Some(StatusCode::REQUEST_TIMEOUT),
                ..Self::new(Code::Cancelled, "timeout", m)
            },
            BodyError::OverBudget { wanted, limit } => Self::from(ConsumeError::TooLarge {
                size: wanted,
                budget: limit,
            }),
            BodyError::MemoryLimit => Self::retry_later(
                "memory_limit",
                "the memory limit is reached, retry later",
                Duration::from_secs(1),
            ),
        }
    }
}

/// An accepted request; `partial` when some Profiles were left out.
#[derive(Debug, Default)]
pub struct Accepted {
    pub partial: Option<ExportProfilesPartialSuccess>,
}

/// What to do with a request that breaks the proto's rules in a way
/// producers commonly do (receiver key `on_invalid`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnInvalid {
    /// Refuse it (invalid Profiles left out as a partial success).
    Refuse,
    /// Repair it and count each repair (see `model::repair`); what cannot
    /// be repaired is refused as with `refuse`.
    #[default]
    Repair,
}

/// What a JSON body becomes while it is mapped to protobuf (a value tree,
/// then the message): a few times the text, reserved before it is taken.
const JSON_EXPANSION: usize = 8;

/// profiles/v1development still changes its field numbers between
/// opentelemetry-proto releases: which ones profcol reads.
const REVISIONS_READ: &str = "profcol reads profiles/v1development of opentelemetry-proto \
     v1.7.0, v1.8.0, v1.9.0 and v1.10.0";

/// Follows problems that bytes of another revision would decode into.
fn revision_hint(read_as: Revision) -> String {
    format!(" (read as opentelemetry-proto {read_as}, the revision that fits these bytes best; {REVISIONS_READ})")
}

/// Where a request came from.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// `grpc` or `http`, as the Collector labels it.
    pub transport: &'static str,
    pub client: Option<SocketAddr>,
    /// The request's headers, when the receiver keeps them
    /// (`include_metadata`); see [`metadata`].
    pub metadata: Vec<(String, String)>,
    /// Attributes set on every resource of what it sent (the `kafka`
    /// receiver's `header_extraction`), replacing the resource's own.
    pub resource: Vec<(String, String)>,
}

impl Origin {
    /// The client's address for a log line (empty when unknown).
    pub fn peer(&self) -> String {
        self.client.map(|a| a.to_string()).unwrap_or_default()
    }
}

/// A request's headers as a batch keeps them: lowercase names, credentials
/// and transport headers left out.
pub fn metadata(headers: &http::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(k, _)| {
            let k = k.as_str();
            !crate::record::is_secret(k)
                && !matches!(
                    k,
                    "content-length" | "content-encoding" | "te" | "grpc-encoding"
                )
        })
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect()
}

/// Checks the request's credentials with the receiver's authenticator,
/// before any of its body is read.
pub fn authenticate(
    auth: Option<&Arc<dyn profcol_pipeline::component::Authenticator>>,
    headers: &http::HeaderMap,
) -> Result<(), Refusal> {
    match auth {
        Some(a) => a.authenticate(headers).map_err(Refusal::unauthenticated),
        None => Ok(()),
    }
}

/// Turns the requests of one receiver into batches for its pipelines.
pub struct Ingest {
    pub id: String,
    pub output: Output,
    pub telemetry: Arc<Telemetry>,
    pub on_invalid: OnInvalid,
    /// Producers already told about, per thing told.
    pub told: Told,
}

/// Producers (by `service.name`, else address) already told about one
/// thing (an older revision, a kind of repair): each is logged once. Past
/// [`Told::MAX`] entries nothing more is remembered, nor logged: the
/// metrics still count.
#[derive(Default)]
pub struct Told(Mutex<HashSet<(String, &'static str)>>);

impl Told {
    pub const MAX: usize = 10_000;

    /// Whether `producer` hears about `what` for the first time.
    pub fn first(&self, producer: &str, what: &'static str) -> bool {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= Self::MAX {
            return false;
        }
        seen.insert((producer.to_owned(), what))
    }
}

/// Who sent `data`: the first resource's `service.name`, else the client's
/// address.
fn producer(data: &ProfilesData, client: Option<SocketAddr>) -> String {
    let lookup = Lookup::of(data);
    data.resource_profiles
        .iter()
        .filter_map(|rp| rp.resource.as_ref())
        .flat_map(|r| &r.attributes)
        .find(|kv| lookup.key_of(kv) == "service.name")
        .and_then(|kv| kv.value.as_ref())
        .map(|v| format_value(v, &lookup))
        .or_else(|| client.map(|a| a.ip().to_string()))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// A request that passed: the batch, the partial success, the samples left
/// out by reason, the revision it was written in and the repairs made.
struct Checked {
    batch: ProfileBatch,
    partial: Option<ExportProfilesPartialSuccess>,
    removed: Vec<(&'static str, u64)>,
    revision: Option<Revision>,
    repairs: Repairs,
}

impl Ingest {
    pub fn new(
        id: String,
        output: Output,
        telemetry: Arc<Telemetry>,
        on_invalid: OnInvalid,
    ) -> Self {
        Self {
            id,
            output,
            telemetry,
            on_invalid,
            told: Told::default(),
        }
    }

    /// Counts a refused request: its samples (0 when it could not be read)
    /// and the request itself, both with the reason, and logs why.
    pub fn refused(&self, origin: &Origin, samples: u64, r: &Refusal) {
        self.telemetry
            .receiver_refused(&self.id, origin.transport, samples, r.reason);
        self.telemetry.receiver_item(&self.id, "request", r.reason);
        if r.retry_after.is_none() {
            profcol_model::warn_limited!(receiver = %self.id, transport = origin.transport, peer = %origin.peer(), reason = r.reason, error = %r.message, "request refused");
        }
    }

    /// An `ExportProfilesServiceRequest`'s bytes (read with `memory`
    /// holding them, and as the client compressed them if it did):
    /// decoded, checked (invalid Profiles left out as a partial success),
    /// handed to every pipeline.
    pub async fn otlp(
        &self,
        bytes: Bytes,
        compressed: Option<Compressed>,
        mut memory: Reservation,
        origin: Origin,
    ) -> Result<Accepted, Refusal> {
        let mode = self.on_invalid;
        // A small request is checked on the task that read it; one that
        // must be decoded goes to the CPU pool all the same. Where the one
        // pipeline's processors decode it anyway, this task first holds
        // their chain, then decodes the request for it, checking it as
        // decoded: it waits for the chain as bytes, and runs through it
        // on the thread that decoded it.
        let small = bytes.len() <= profcol_model::cpu::INLINE;
        let claim = if small {
            self.output.claim_chain().await
        } else {
            None
        };
        let decodes = claim.is_some();
        let early = small.then(|| {
            if decodes {
                wire_check::decode_clean(&bytes).map(|(b, c)| (Some(b), c))
            } else {
                wire_check::check(&bytes).map(|c| (None, c))
            }
        });
        let inline = matches!(early, Some(Some(_)));
        let work = move || {
            // A request valid as it is stays bytes, decoded only if a stage
            // reads it; the walk that finds it clean also measures what
            // decoding would take.
            let clean = early.unwrap_or_else(|| wire_check::check(&bytes).map(|c| (None, c)));
            let heap = clean
                .as_ref()
                .map_or_else(|| estimate_decoded(&bytes), |(_, c)| c.heap);
            // What decoding will take, reserved before it is taken (what
            // was reserved up front beyond it goes back).
            let needed = bytes.len() + heap;
            memory.needed(needed);
            // The compressed copy is kept for a batch that stays as
            // received, if the budget has room for it too.
            let copy = match &compressed {
                Some(c) if clean.is_some() => c.bytes.len(),
                _ => 0,
            };
            let (compressed, needed) = match memory.try_resize_to(needed + copy) {
                Ok(()) if copy > 0 => (compressed, needed + copy),
                _ => (None, needed),
            };
            if let Err(e) = memory.try_resize_to(needed) {
                return (Err((0, Refusal::from(ConsumeError::memory(e)))), memory);
            }
            let checked = match clean {
                Some((decoded, clean)) => Ok(Checked {
                    batch: decoded
                        .unwrap_or_else(|| ProfileBatch::checked(bytes, clean))
                        .with_compressed(compressed),
                    partial: None,
                    removed: Vec::new(),
                    revision: Some(Revision::CURRENT),
                    repairs: Repairs::default(),
                }),
                None => decode(bytes).and_then(|d| {
                    let hint = revision_hint(d.revision);
                    let mut c = check(d.batch, Some(d.findings), mode, &hint)?;
                    c.revision = Some(d.revision);
                    Ok(c)
                }),
            };
            (checked, memory)
        };
        let (checked, memory) = if inline {
            work()
        } else {
            profcol_model::cpu::run(work).await
        };
        profcol_pipeline::runtime::CHAIN_CLAIM
            .scope(
                std::cell::RefCell::new(claim),
                self.hand_off(checked, memory, origin),
            )
            .await
    }

    /// An OTLP/JSON `ExportProfilesServiceRequest` of any revision profcol
    /// reads (see `otlp_json::decode_any`), as [`Ingest::otlp`] takes bytes.
    pub async fn otlp_json(
        &self,
        json: Bytes,
        mut memory: Reservation,
        origin: Origin,
    ) -> Result<Accepted, Refusal> {
        if let Err(e) = memory.try_grow_to(json.len().saturating_mul(JSON_EXPANSION)) {
            let r = Refusal::from(ConsumeError::memory(e));
            self.refused(&origin, 0, &r);
            return Err(r);
        }
        let mode = self.on_invalid;
        let checked = profcol_model::cpu::run(move || {
            let d = otlp_json::decode_any(&json)
                .map_err(|e| (0, Refusal::invalid("malformed", e.to_string())))?;
            let hint = revision_hint(d.revision);
            let mut c = check(ProfileBatch::new(d.data), Some(d.findings), mode, &hint)?;
            c.revision = Some(d.revision);
            Ok(c)
        })
        .await;
        self.hand_off(checked, memory, origin).await
    }

    /// Profiles converted from another format (pprof, folded stacks, a
    /// Pyroscope push) by the receiver, with the memory they hold: checked
    /// as an OTLP request is, handed to every pipeline.
    pub async fn converted(
        &self,
        data: ProfilesData,
        memory: Reservation,
        origin: Origin,
    ) -> Result<Accepted, Refusal> {
        let mode = self.on_invalid;
        let checked =
            profcol_model::cpu::run(move || check(ProfileBatch::new(data), None, mode, "")).await;
        self.hand_off(checked, memory, origin).await
    }

    async fn hand_off(
        &self,
        checked: Result<Checked, (u64, Refusal)>,
        mut memory: Reservation,
        origin: Origin,
    ) -> Result<Accepted, Refusal> {
        let Checked {
            mut batch,
            partial,
            removed,
            revision,
            repairs,
        } = match checked {
            Ok(c) => c,
            Err((samples, r)) => {
                self.refused(&origin, samples, &r);
                return Err(r);
            }
        };
        for (reason, n) in removed {
            self.telemetry
                .receiver_refused(&self.id, origin.transport, n, reason);
        }
        if let Some(p) = &partial {
            profcol_model::warn_limited!(receiver = %self.id, transport = origin.transport, peer = %origin.peer(), rejected_profiles = p.rejected_profiles, error = %p.error_message, "request partially refused");
        }
        self.tell(&batch, &origin, revision, &repairs);
        if !origin.resource.is_empty() {
            set_resource_attributes(&mut batch, &origin.resource);
        }
        memory.set(batch.held_bytes());
        batch.meta.memory = Some(Held::new(memory));
        batch.meta.transport = origin.transport;
        batch.meta.client_addr = origin.client;
        batch.meta.metadata = origin.metadata.clone();
        match self.output.consume(batch).await {
            Ok(()) => {
                if let Some(r) = revision {
                    self.telemetry
                        .receiver_request(&self.id, origin.transport, r.as_str());
                }
                Ok(Accepted { partial })
            }
            Err(e) => {
                // The samples were counted as refused by `consume`.
                let r = Refusal::from(e);
                self.telemetry.receiver_item(&self.id, "request", r.reason);
                Err(r)
            }
        }
    }
}

impl Ingest {
    /// Counts the repairs, and tells each producer once that it sends an
    /// older revision and what had to be repaired.
    fn tell(
        &self,
        batch: &ProfileBatch,
        origin: &Origin,
        revision: Option<Revision>,
        repairs: &Repairs,
    ) {
        let counts = repairs.counts();
        for &(kind, n) in &counts {
            self.telemetry.receiver_repairs(&self.id, kind, n);
        }
        let older = revision.filter(|&r| r != Revision::CURRENT);
        if older.is_none() && counts.is_empty() {
            return;
        }
        let producer = producer(batch.data(), origin.client);
        if let Some(r) = older {
            if self.told.first(&producer, r.as_str()) {
                profcol_model::info_limited!(receiver = %self.id, producer = %producer, otlp.proto_revision = r.as_str(), "producer sends an older revision of OTLP profiles; read and translated to v1.10.0");
            }
        }
        for (kind, n) in counts {
            if self.told.first(&producer, kind) {
                let tables: Vec<&str> = repairs.shifted.iter().map(|t| t.field_name()).collect();
                profcol_model::warn_limited!(receiver = %self.id, producer = %producer, kind, n, tables = ?tables, "repaired a request instead of refusing it (on_invalid: repair); logged once per producer and kind");
            }
        }
    }
}

/// Puts `attrs` on every resource of `batch`, as the Collector's
/// `PutStr` does: an attribute of the same key is replaced.
fn set_resource_attributes(batch: &mut ProfileBatch, attrs: &[(String, String)]) {
    use profcol_model::proto::{any_value, AnyValue, KeyValue};
    let data = batch.data_mut();
    profcol_model::dictionary::resolve_references(data);
    for rp in &mut data.resource_profiles {
        let own = &mut rp.resource.get_or_insert_with(Default::default).attributes;
        for (key, value) in attrs {
            let value = Some(AnyValue {
                value: Some(any_value::Value::StringValue(value.clone())),
            });
            match own.iter_mut().find(|kv| kv.key == *key) {
                Some(kv) => kv.value = value,
                None => own.push(KeyValue {
                    key: key.clone(),
                    value,
                    ..Default::default()
                }),
            }
        }
    }
}

/// A request read as the revision that fits it.
#[derive(Debug)]
struct Read {
    batch: ProfileBatch,
    revision: Revision,
    findings: Findings,
}

/// Decodes an `ExportProfilesServiceRequest` of any revision profcol reads;
/// a refusal saying why no revision decodes it.
fn decode(bytes: Bytes) -> Result<Read, (u64, Refusal)> {
    match otlp_revisions::decode(&bytes) {
        Ok(d) => Ok(Read {
            // The received bytes pass through only if they are v1.10.0's.
            batch: if d.revision == Revision::CURRENT {
                ProfileBatch::from_encoded(d.data, bytes)
            } else {
                ProfileBatch::new(d.data)
            },
            revision: d.revision,
            findings: d.findings,
        }),
        Err(e) => {
            let e = e
                .to_string()
                .replace(" ProfilesData.", " ExportProfilesServiceRequest.");
            Err((
                0,
                Refusal::invalid(
                    "malformed",
                    format!(
                        "cannot decode ExportProfilesServiceRequest ({} bytes): {e} ({REVISIONS_READ})",
                        bytes.len()
                    ),
                ),
            ))
        }
    }
}

/// Validates a batch, repairing it first if `mode` says so and it needs
/// it: the batch, the partial success and the samples it left out; or the
/// refusal with the samples refused. `found` is what validation already
/// found in the batch; `hint` follows problems that another encoding of
/// the data would explain.
fn check(
    mut batch: ProfileBatch,
    found: Option<Findings>,
    mode: OnInvalid,
    hint: &str,
) -> Result<Checked, (u64, Refusal)> {
    let mut found = found.unwrap_or_else(|| findings(batch.data()));
    let mut repairs = Repairs::default();
    if !found.is_valid() && mode == OnInvalid::Repair {
        repairs = repair(batch.data_mut());
        found = findings(batch.data());
    }
    // An empty sample is one observation, refused whatever happens next.
    let empty = repairs.empty_samples;
    let removed = if empty > 0 {
        vec![("empty_sample", empty)]
    } else {
        Vec::new()
    };
    let invalid = |e: &ValidationError| {
        // Broken indices and zero values are what another revision's
        // encoding decodes into; an empty sample is the sender's own.
        let hint = match e.problem {
            Problem::OutOfRange { .. } | Problem::NotZeroValue { .. } => hint,
            Problem::ValueCountMismatch { .. }
            | Problem::EmptySample
            | Problem::TimeOutOfRange { .. }
            | Problem::Malformed(_) => "",
        };
        format!("invalid profiles data: {e}{hint}")
    };
    let refuse = |batch: &ProfileBatch, e: &ValidationError| {
        (
            batch.sample_count() + empty,
            Refusal::invalid("invalid", invalid(e)),
        )
    };
    let checked = |batch, partial, removed| Checked {
        batch,
        partial,
        removed,
        revision: None,
        repairs: repairs.clone(),
    };
    // Invalid Profiles are left out and the rest accepted (OTLP's partial
    // success), unless nothing valid is left.
    match found.into_result() {
        Err(e) => Err(refuse(&batch, &e)),
        Ok(bad) if bad.is_empty() => Ok(checked(batch, None, removed)),
        Ok(bad) if bad.len() as u64 == batch.profile_count() => Err(refuse(&batch, &bad[0].1)),
        Ok(bad) => {
            let mut data: ProfilesData = batch.into_data();
            let mut bad_at = bad.iter().map(|(at, _)| *at).peekable();
            let mut removed_invalid = 0;
            retain_profiles(&mut data, |at, p| {
                let gone = bad_at.next_if_eq(&at).is_some();
                removed_invalid += if gone { profile_sample_count(p) } else { 0 };
                !gone
            });
            let partial = ExportProfilesPartialSuccess {
                rejected_profiles: bad.len() as i64,
                error_message: invalid(&bad[0].1),
            };
            let mut removed_all = removed;
            removed_all.push(("invalid", removed_invalid));
            Ok(checked(ProfileBatch::new(data), Some(partial), removed_all))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_errors_name_the_request_type() {
        // resource_profiles[0] holds a truncated varint.
        let (samples, r) = decode(Bytes::from_static(&[0x0a, 0x02, 0x08, 0xff])).unwrap_err();
        assert_eq!(samples, 0);
        assert_eq!(r.code, Code::InvalidArgument);
        assert!(
            r.message
                .starts_with("cannot decode ExportProfilesServiceRequest (4 bytes): ")
                && r.message
                    .contains("ExportProfilesServiceRequest.resource_profiles: ")
                && !r.message.contains("ProfilesData"),
            "{}",
            r.message
        );
    }

    #[test]
    fn refusals_map_to_grpc_and_http_as_the_collector_maps_them() {
        let full = Refusal::from(ConsumeError::queue_full("otlp"));
        assert_eq!(full.code, Code::Unavailable);
        assert_eq!(full.http_status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(full.retry_after.is_some());
        let details = tonic_types::StatusExt::get_details_retry_info(&full.grpc_status());
        assert!(details.is_some(), "UNAVAILABLE carries RetryInfo");
        let big = Refusal::from(BodyError::TooLarge { limit: 10 });
        assert_eq!(
            (big.code, big.http_status()),
            (Code::ResourceExhausted, StatusCode::PAYLOAD_TOO_LARGE)
        );
        assert!(tonic_types::StatusExt::get_details_retry_info(&big.grpc_status()).is_none());
        assert_eq!(
            Refusal::invalid("x", "y").http_status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            Refusal::unauthenticated("x").http_status(),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            Refusal::from(BodyError::UnsupportedEncoding("compress".into())).http_status(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
    }
}
