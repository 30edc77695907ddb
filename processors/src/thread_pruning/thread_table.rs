//! The thread table the Sentry receiver keeps: profile attribute
//! `sentry.thread_metadata`, a kvlist keyed by thread id whose values are
//! kvlists `{name, priority}`. Sentry asks SDKs to send metadata only for
//! threads that have samples, and Relay drops the rest (`relay_rules` step 6);
//! Python sends every thread alive at flush, so entries without samples are
//! common.

use profcol_model::proto::{any_value::Value, AnyValue, KeyValue, KeyValueList};

use super::config::Rules;

/// The table a profile should carry after pruning, when it differs.
pub(crate) enum TableChange {
    /// Every entry stays as it is.
    Unchanged,
    /// Some entries were removed or renamed; `removed` entries are gone.
    Replaced { value: AnyValue, removed: u64 },
    /// No entry is left: the attribute goes.
    Removed { removed: u64 },
}

/// Entries of a `sentry.thread_metadata` value; `None` if it is not a kvlist.
pub(crate) fn entries(v: &AnyValue) -> Option<&[KeyValue]> {
    match &v.value {
        Some(Value::KvlistValue(KeyValueList { values })) => Some(values),
        _ => None,
    }
}

/// Keeps the entries whose thread id `referenced` accepts and applies
/// `rename_threads` to their `name`.
pub(crate) fn prune(
    table: &[KeyValue],
    rules: &Rules,
    mut referenced: impl FnMut(&str) -> bool,
) -> TableChange {
    let mut removed = 0u64;
    let mut renamed = false;
    let mut kept: Vec<(usize, Option<String>)> = Vec::with_capacity(table.len());
    for (i, entry) in table.iter().enumerate() {
        if !referenced(&entry.key) {
            removed += 1;
            continue;
        }
        let new_name = if rules.rename.is_empty() {
            None
        } else {
            name_of(entry).and_then(|n| rules.renamed(n))
        };
        renamed |= new_name.is_some();
        kept.push((i, new_name));
    }
    if removed == 0 && !renamed {
        return TableChange::Unchanged;
    }
    if kept.is_empty() {
        return TableChange::Removed { removed };
    }
    let values = kept
        .into_iter()
        .map(|(i, new_name)| {
            let mut entry = table[i].clone();
            if let Some(name) = new_name {
                set_name(&mut entry, name);
            }
            entry
        })
        .collect();
    TableChange::Replaced {
        value: AnyValue {
            value: Some(Value::KvlistValue(KeyValueList { values })),
        },
        removed,
    }
}

fn fields(entry: &KeyValue) -> Option<&[KeyValue]> {
    entry.value.as_ref().and_then(entries)
}

fn name_of(entry: &KeyValue) -> Option<&str> {
    fields(entry)?
        .iter()
        .find(|f| f.key == "name")
        .and_then(|f| match f.value.as_ref()?.value.as_ref()? {
            Value::StringValue(s) => Some(s.as_str()),
            _ => None,
        })
}

fn set_name(entry: &mut KeyValue, name: String) {
    let Some(Value::KvlistValue(list)) = entry.value.as_mut().and_then(|v| v.value.as_mut()) else {
        return;
    };
    if let Some(f) = list.values.iter_mut().find(|f| f.key == "name") {
        f.value = Some(AnyValue {
            value: Some(Value::StringValue(name)),
        });
    }
}
