//! The one place that names the generated OTLP types, so a proto bump touches
//! one file.

pub use opentelemetry_proto::tonic::collector::profiles::v1development as collector;
pub use opentelemetry_proto::tonic::common::v1 as common;
pub use opentelemetry_proto::tonic::profiles::v1development as profiles;
pub use opentelemetry_proto::tonic::resource::v1 as resource;

pub use collector::{
    ExportProfilesPartialSuccess, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
};
pub use common::{any_value, AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList};
pub use profiles::{
    Function, KeyValueAndUnit, Line, Link, Location, Mapping, Profile, ProfilesData,
    ProfilesDictionary, ResourceProfiles, Sample, ScopeProfiles, Stack, ValueType,
};
pub use resource::Resource;

/// gRPC path of `ProfilesService/Export`.
pub const EXPORT_PATH: &str =
    "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export";

/// `ExportProfilesServiceRequest` and `ProfilesData` share field numbers and
/// types, so the bytes of one decode as the other; these moves avoid a copy.
pub fn request_into_data(req: ExportProfilesServiceRequest) -> ProfilesData {
    ProfilesData {
        resource_profiles: req.resource_profiles,
        dictionary: req.dictionary,
    }
}

pub fn data_into_request(data: ProfilesData) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest {
        resource_profiles: data.resource_profiles,
        dictionary: data.dictionary,
    }
}

/// What a `ProfilesData` without a dictionary refers to: every index 0.
static EMPTY_DICTIONARY: ProfilesDictionary = ProfilesDictionary {
    mapping_table: Vec::new(),
    location_table: Vec::new(),
    function_table: Vec::new(),
    link_table: Vec::new(),
    string_table: Vec::new(),
    attribute_table: Vec::new(),
    stack_table: Vec::new(),
};

/// The dictionary of `data`, or an empty one.
pub fn dictionary_of(data: &ProfilesData) -> &ProfilesDictionary {
    data.dictionary.as_ref().unwrap_or(&EMPTY_DICTIONARY)
}

/// Whether a dictionary entry is its table's zero value, the one index 0
/// holds. pdata (so every Go producer: the Collector, the eBPF profiler)
/// writes the zero attribute with an empty `value` present, which means
/// what no value means.
pub trait ZeroEntry {
    fn is_zero(&self) -> bool;
}

macro_rules! zero_is_default {
    ($($t:ty),*) => {$(
        impl ZeroEntry for $t {
            fn is_zero(&self) -> bool {
                *self == <$t>::default()
            }
        }
    )*};
}
zero_is_default!(String, Mapping, Location, Function, Stack);

/// Ids of zeros are no ids (OpenTelemetry calls an all-zero trace id
/// invalid): pdata reads async-profiler 4.5's zero link, 16 and 8 zero
/// bytes, as its own empty one.
impl ZeroEntry for Link {
    fn is_zero(&self) -> bool {
        self.trace_id.iter().chain(&self.span_id).all(|&b| b == 0)
    }
}

fn no_value(v: &Option<AnyValue>) -> bool {
    v.as_ref().is_none_or(|v| v.value.is_none())
}

impl ZeroEntry for KeyValueAndUnit {
    fn is_zero(&self) -> bool {
        self.key_strindex == 0 && self.unit_strindex == 0 && no_value(&self.value)
    }
}

/// v1.7.0's attribute table.
impl ZeroEntry for KeyValue {
    fn is_zero(&self) -> bool {
        self.key.is_empty() && no_value(&self.value)
    }
}

/// OTLP metrics, which profiles pipelines make through connectors
/// (`signaltometrics`) and metrics pipelines carry.
pub mod metrics {
    pub use opentelemetry_proto::tonic::collector::metrics::v1::{
        ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
    };
    pub use opentelemetry_proto::tonic::metrics::v1::*;

    /// The gRPC method the `otlp` exporter calls with metrics.
    pub const EXPORT_PATH: &str = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";

    /// Data points in a request: what the Collector's metric-point
    /// counters count.
    pub fn point_count(req: &ExportMetricsServiceRequest) -> u64 {
        use metric::Data;
        let mut n = 0usize;
        for rm in &req.resource_metrics {
            for sm in &rm.scope_metrics {
                for m in &sm.metrics {
                    n += match &m.data {
                        Some(Data::Sum(s)) => s.data_points.len(),
                        Some(Data::Gauge(g)) => g.data_points.len(),
                        Some(Data::Histogram(h)) => h.data_points.len(),
                        Some(Data::ExponentialHistogram(h)) => h.data_points.len(),
                        Some(Data::Summary(s)) => s.data_points.len(),
                        None => 0,
                    };
                }
            }
        }
        n as u64
    }
}
