//! Attribute keys that carry pprof fields OTLP has no field for, from the
//! OpenTelemetry semantic conventions (`model/pprof/registry.yaml`,
//! `model/process/registry.yaml`).

/// Scope attribute: the pprof `default_sample_type` (a type name).
pub const DEFAULT_SAMPLE_TYPE: &str = "pprof.scope.default_sample_type";
/// Scope attribute: original index of each profile's sample type (`int[]`).
pub const SAMPLE_TYPE_ORDER: &str = "pprof.scope.sample_type_order";
/// Profile attribute: the pprof `comment` lines (`string[]`).
pub const COMMENT: &str = "pprof.profile.comment";
pub const DROP_FRAMES: &str = "pprof.profile.drop_frames";
pub const KEEP_FRAMES: &str = "pprof.profile.keep_frames";
/// Profile attribute: the pprof `doc_url` (a documentation link).
pub const DOC_URL: &str = "pprof.profile.doc_url";
pub const LOCATION_IS_FOLDED: &str = "pprof.location.is_folded";
pub const HAS_FUNCTIONS: &str = "pprof.mapping.has_functions";
pub const HAS_FILENAMES: &str = "pprof.mapping.has_filenames";
pub const HAS_LINE_NUMBERS: &str = "pprof.mapping.has_line_numbers";
pub const HAS_INLINE_FRAMES: &str = "pprof.mapping.has_inline_frames";

/// Prefix of the build id attributes of a mapping (`.gnu`, `.go`, `.htlhash`).
pub const BUILD_ID_PREFIX: &str = "process.executable.build_id.";
/// pprof does not say which kind its `build_id` is; the Go runtime and most
/// native profilers write the GNU note, as the Collector's translator assumes.
pub const BUILD_ID_GNU: &str = "process.executable.build_id.gnu";
/// Build id kinds in order of preference when a mapping carries several.
pub const BUILD_ID_PREFERENCE: [&str; 3] = [
    BUILD_ID_GNU,
    "process.executable.build_id.go",
    "process.executable.build_id.htlhash",
];

/// Label keys a sample's `Link` becomes (and is read back from).
pub const TRACE_ID_LABEL: &str = "trace_id";
pub const SPAN_ID_LABEL: &str = "span_id";

/// Keys under this prefix describe the pprof encoding itself and never become
/// sample labels.
pub const PPROF_PREFIX: &str = "pprof.";

pub const SERVICE_NAME: &str = "service.name";
pub const PROCESS_EXECUTABLE_NAME: &str = "process.executable.name";
