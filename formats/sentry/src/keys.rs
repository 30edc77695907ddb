//! Attribute keys the Sentry conversion writes and reads, and the mappings
//! between Sentry platforms and OpenTelemetry semantic-convention values.

// Resource (OpenTelemetry semantic conventions).
pub const SERVICE_NAME: &str = "service.name";
pub const SERVICE_VERSION: &str = "service.version";
pub const SERVICE_INSTANCE_ID: &str = "service.instance.id";
pub const DEPLOYMENT_ENVIRONMENT: &str = "deployment.environment.name";
/// The pre-1.27 name, still sent by older SDKs.
pub const DEPLOYMENT_ENVIRONMENT_OLD: &str = "deployment.environment";
pub const SDK_NAME: &str = "telemetry.sdk.name";
pub const SDK_VERSION: &str = "telemetry.sdk.version";
pub const SDK_LANGUAGE: &str = "telemetry.sdk.language";
pub const HOST_NAME: &str = "host.name";
pub const HOST_ARCH: &str = "host.arch";
pub const PROCESS_PID: &str = "process.pid";
pub const HOST_ID: &str = "host.id";
pub const CONTAINER_ID: &str = "container.id";
pub const K8S_POD_UID: &str = "k8s.pod.uid";
pub const OS_NAME: &str = "os.name";
pub const OS_VERSION: &str = "os.version";
pub const OS_BUILD_ID: &str = "os.build_id";
pub const RUNTIME_NAME: &str = "process.runtime.name";
pub const RUNTIME_VERSION: &str = "process.runtime.version";
pub const DEVICE_MODEL: &str = "device.model.identifier";
pub const DEVICE_MANUFACTURER: &str = "device.manufacturer";
pub const SENTRY_PROJECT_ID: &str = "sentry.project_id";

// Profile attributes: what Sentry needs to go back.
pub const SENTRY_PROFILER_ID: &str = "sentry.profiler_id";
pub const SENTRY_CHUNK_ID: &str = "sentry.chunk_id";
pub const SENTRY_EVENT_ID: &str = "sentry.event_id";
pub const SENTRY_PLATFORM: &str = "sentry.platform";
pub const SENTRY_RELEASE: &str = "sentry.release";
pub const SENTRY_ENVIRONMENT: &str = "sentry.environment";
pub const SENTRY_DIST: &str = "sentry.dist";
pub const SENTRY_VERSION: &str = "sentry.version";
/// kvlist: thread id -> kvlist {name, priority}.
pub const SENTRY_THREAD_METADATA: &str = "sentry.thread_metadata";
/// JSON text, as sent.
pub const SENTRY_MEASUREMENTS: &str = "sentry.measurements";
/// JSON text, as sent.
pub const SENTRY_DEBUG_META: &str = "sentry.debug_meta";
/// JSON text of the v1 transaction metadata, as sent.
pub const SENTRY_TRANSACTION: &str = "sentry.transaction";
pub const SENTRY_TRANSACTION_NAME: &str = "sentry.transaction.name";
/// JSON text of the v1 `queue_metadata` (Cocoa), as sent.
pub const SENTRY_QUEUE_METADATA: &str = "sentry.queue_metadata";
pub const SENTRY_DEVICE_IS_EMULATOR: &str = "sentry.device.is_emulator";
pub const SENTRY_DEVICE_LOCALE: &str = "sentry.device.locale";
/// Android: the UUID of the app's ProGuard mapping.
pub const SENTRY_BUILD_ID: &str = "sentry.build_id";
/// React Native on Android: the JavaScript profile beside the method trace
/// (JSON text, as sent).
pub const SENTRY_JS_PROFILE: &str = "sentry.js_profile";

// Sample attributes.
pub const THREAD_ID: &str = "thread.id";
pub const THREAD_NAME: &str = "thread.name";
pub const SENTRY_QUEUE_ADDRESS: &str = "sentry.queue_address";

// Location attributes.
pub const FRAME_TYPE: &str = "profile.frame.type";
pub const SENTRY_IN_APP: &str = "sentry.in_app";
pub const SENTRY_MODULE: &str = "sentry.module";
pub const SENTRY_PACKAGE: &str = "sentry.package";
/// A frame's `symbol` when `raw_function` took the Function's system name.
pub const SENTRY_SYMBOL: &str = "sentry.symbol";
/// The frame's `filename`, when it differs from the Function's filename
/// (`""` when the frame had none).
pub const SENTRY_FILENAME: &str = "sentry.filename";
/// The frame's `abs_path`, when it differs from the Function's filename
/// (`""` when the frame had none).
pub const SENTRY_ABS_PATH: &str = "sentry.abs_path";

// Mapping attributes.
pub const BUILD_ID_GNU: &str = "process.executable.build_id.gnu";
pub const BUILD_ID_GO: &str = "process.executable.build_id.go";
pub const BUILD_ID_HTLHASH: &str = "process.executable.build_id.htlhash";
pub const BUILD_ID_PROFILING: &str = "process.executable.build_id.profiling";
pub const SENTRY_DEBUG_ID: &str = "sentry.debug_id";
pub const SENTRY_CODE_ID: &str = "sentry.code_id";
pub const SENTRY_DEBUG_FILE: &str = "sentry.debug_file";
pub const SENTRY_IMAGE_TYPE: &str = "sentry.image_type";
pub const SENTRY_IMAGE_VMADDR: &str = "sentry.image_vmaddr";
pub const SENTRY_ARCH: &str = "sentry.arch";

/// `profile.frame.type` of a frame from a Sentry platform.
pub fn frame_type(platform: &str) -> Option<&'static str> {
    Some(match platform {
        "python" => "cpython",
        "node" | "javascript" => "v8js",
        "java" | "android" | "kotlin" => "jvm",
        "cocoa" | "native" | "c" | "objc" | "swift" => "native",
        "go" => "go",
        "rust" => "rust",
        "php" => "php",
        "ruby" => "ruby",
        "csharp" | "dotnet" => "dotnet",
        "perl" => "perl",
        "elixir" | "erlang" => "beam",
        _ => return None,
    })
}

/// `telemetry.sdk.language` for a Sentry platform.
pub fn sdk_language(platform: &str) -> Option<&'static str> {
    Some(match platform {
        "python" => "python",
        "node" => "nodejs",
        "javascript" => "webjs",
        "cocoa" | "swift" | "objc" => "swift",
        "java" | "android" | "kotlin" => "java",
        "go" => "go",
        "rust" => "rust",
        "php" => "php",
        "ruby" => "ruby",
        "csharp" | "dotnet" => "dotnet",
        "native" | "c" => "cpp",
        "elixir" | "erlang" => "erlang",
        _ => return None,
    })
}

/// Sentry platform for a `telemetry.sdk.language`.
pub fn platform_from_language(lang: &str) -> Option<&'static str> {
    Some(match lang {
        "python" => "python",
        "nodejs" => "node",
        "webjs" => "javascript",
        "swift" => "cocoa",
        // "android" would route the chunk to Relay's Android format.
        "java" => "java",
        "go" => "go",
        "rust" => "rust",
        "php" => "php",
        "ruby" => "ruby",
        "dotnet" => "csharp",
        "cpp" => "native",
        "erlang" => "elixir",
        _ => return None,
    })
}

/// Sentry platform for a `profile.frame.type`.
pub fn platform_from_frame_type(ft: &str) -> Option<&'static str> {
    Some(match ft {
        "cpython" => "python",
        "v8js" => "node",
        "jvm" => "java",
        "native" | "kernel" => "native",
        "go" => "go",
        "rust" => "rust",
        "php" => "php",
        "ruby" => "ruby",
        "dotnet" => "csharp",
        "perl" => "perl",
        "beam" => "elixir",
        _ => return None,
    })
}

/// `host.arch` value for a Sentry `device.architecture`.
pub fn host_arch(arch: &str) -> &str {
    match arch {
        "x86_64" | "amd64" => "amd64",
        "arm64" | "arm64e" | "aarch64" => "arm64",
        "x86" | "i386" | "i686" => "x86",
        "arm" | "armv7" | "armv7k" | "armv7s" => "arm32",
        "ppc64" | "ppc64le" => "ppc64",
        "s390x" => "s390x",
        other => other,
    }
}
