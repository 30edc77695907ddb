//! A batch folded into stacks per service and sample type: what the store
//! keeps and `profcol flamegraph` renders.

use std::collections::HashMap;

use profcol_model::batch::profile_sample_count;
use profcol_model::proto::{ProfilesData, ValueType};
use profcol_model::resolved::for_each_profile_stacks;

/// Where a stack's samples go: one flame graph each.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    /// `service.name` of the resource (`unknown_service` without one).
    pub service: String,
    /// `type/unit` of the profile.
    pub sample_type: String,
}

/// The stacks of one series in one batch.
#[derive(Debug, Default)]
pub struct Series {
    /// Observations (as every profcol metric counts them).
    pub samples: u64,
    /// The profilers that sent them: scope `name version`, else the
    /// resource's `telemetry.sdk.name`.
    pub producers: Vec<String>,
    /// Root-first stack (`main;run;work`) -> total value.
    pub stacks: HashMap<String, i64>,
}

/// Every profile of `data`, folded by service and sample type.
pub fn fold(data: &ProfilesData) -> HashMap<SeriesKey, Series> {
    let mut out: HashMap<SeriesKey, Series> = HashMap::new();
    for_each_profile_stacks(data, |p| {
        let lookup = p.lookup;
        let attrs = p
            .resource
            .resource
            .as_ref()
            .map_or(&[][..], |r| &r.attributes[..]);
        let attr = |key: &str| {
            attrs
                .iter()
                .find(|kv| lookup.key_of(kv) == key)
                .and_then(|kv| kv.value.as_ref())
                .and_then(|v| lookup.str_value(v))
                .filter(|s| !s.is_empty())
        };
        let key = SeriesKey {
            service: attr("service.name").unwrap_or("unknown_service").to_owned(),
            sample_type: value_type(p.profile.sample_type.as_ref(), &lookup),
        };
        let producer = match p.scope.filter(|s| !s.name.is_empty()) {
            Some(s) => format!("{} {}", s.name, s.version).trim().to_owned(),
            None => attr("telemetry.sdk.name").unwrap_or("-").to_owned(),
        };
        let series = out.entry(key).or_default();
        series.samples += profile_sample_count(p.profile);
        if !series.producers.contains(&producer) {
            series.producers.push(producer);
        }
        for (stack, total) in p.stacks {
            match series.stacks.get_mut(stack) {
                Some(t) => *t = t.wrapping_add(total),
                None => {
                    series.stacks.insert(stack.to_owned(), total);
                }
            }
        }
    });
    out
}

/// `type/unit`, `-` for none (as the resolved view prints it).
fn value_type(vt: Option<&ValueType>, lookup: &profcol_model::dictionary::Lookup<'_>) -> String {
    match vt.filter(|vt| **vt != ValueType::default()) {
        Some(vt) => format!(
            "{}/{}",
            lookup.string(vt.type_strindex),
            lookup.string(vt.unit_strindex)
        ),
        None => "-".to_owned(),
    }
}
