//! The `dynatrace` detector (the Collector's `internal/dynatrace`): the
//! host's `dt.entity.host`, `host.name` and `dt.smartscape.host` from the
//! properties file the Dynatrace OneAgent writes. Without the file it
//! finds nothing, whatever `fail_on_missing_metadata`; it has no settings.

use profcol_model::proto::KeyValue;
use profcol_ottl::value::map_put;

use super::detect::{text, Host};

pub(super) const PATH: &str = "/var/lib/dynatrace/enrichment/dt_host_metadata.properties";

/// The properties it takes; the others are skipped.
const PROPERTIES: [&str; 3] = ["dt.entity.host", "host.name", "dt.smartscape.host"];

/// The properties in the file's order, a repeated one keeping its first
/// place and its last value: `key=value` lines (split at the first `=`,
/// value trimmed); other lines are skipped with a warning.
pub(super) fn detect(host: &dyn Host) -> Result<Vec<KeyValue>, String> {
    let Some(file) = host.read_file(PATH)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for line in file.lines() {
        let Some((key, value)) = line.split_once('=') else {
            tracing::warn!(
                line,
                "Skipping line as it does not match the expected format of '<key>=<value>"
            );
            continue;
        };
        if key.is_empty() || value.is_empty() || !PROPERTIES.contains(&key) {
            continue;
        }
        map_put(&mut out, key.trim(), text(value.trim()));
    }
    Ok(out)
}
