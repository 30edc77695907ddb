//! Rewriting unit strings, and optionally values, through the dictionary
//! every profile of a batch shares.
//!
//! Work is per distinct unit occurrence (value types, attribute entries),
//! never per sample, except for scaling sample values. A first read-only pass
//! plans every change, so a batch that needs none is left untouched and keeps
//! its received encoding.
//!
//! A unit string is renamed in place when every use of it wants the same new
//! spelling and that spelling is not in the table yet: no index changes. Other
//! uses are repointed to an interned string, changed attribute entries are
//! re-interned by value (so two spellings of one unit become one entry), and
//! strings orphaned on the way are removed. Samples never refer to strings,
//! so none of this visits them.

use hashbrown::{HashMap, HashSet};

use profcol_model::dictionary::{
    retain_flagged, visit, Interner, Lookup, Remap, Table, TableRemap,
};
use profcol_model::proto::{
    any_value::Value, AnyValue, Profile, ProfilesData, ProfilesDictionary, ResourceProfiles, Sample,
};
use profcol_model::{profiles_mut, ProfileBatch};

use super::units::{self, Dimension, Target, Unit, NANOSECOND};

/// What to normalize; see [`super::UnitNormalizationConfig`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub target: Target,
    pub scale_to_base: bool,
    pub samples_to_time: bool,
}

/// What one call did; each field is counted as a processor event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Unit occurrences (value types, attribute entries) whose spelling the
    /// table does not know; they pass unchanged.
    pub unknown_units: u64,
    /// Unit occurrences now written differently.
    pub units_rewritten: u64,
    /// Profiles whose sample values were multiplied.
    pub profiles_scaled: u64,
    /// Attribute entries whose values were multiplied.
    pub attributes_scaled: u64,
    /// `samples`/`count` profiles turned into time profiles.
    pub profiles_to_time: u64,
    /// `samples`/`count` profiles not turned into time profiles because their
    /// scope already holds the time profile the conversion would make, over
    /// the same window: the same recording under another sample type.
    pub to_time_skipped: u64,
    /// Values that would overflow i64 and were saturated.
    pub saturated: u64,
    /// False when the batch was left as it was.
    pub changed: bool,
}

/// Normalizes `batch`, taking mutable access to its data only when
/// something changes (so an already normalized batch keeps its encoding).
pub fn normalize_batch(batch: &mut ProfileBatch, opts: &Options) -> Outcome {
    let plan = Planner::new(batch.data(), opts).plan();
    if !plan.changes {
        return plan.unchanged();
    }
    apply(batch.data_mut(), plan)
}

/// Normalizes `data` in place.
pub fn normalize(data: &mut ProfilesData, opts: &Options) -> Outcome {
    let plan = Planner::new(data, opts).plan();
    if !plan.changes {
        return plan.unchanged();
    }
    apply(data, plan)
}

/// A string index holding a unit, and the spelling it should have.
#[derive(Clone, Copy, Debug)]
struct Slot {
    old: i32,
    target: &'static str,
    /// The string at `old` is not `target` (before any rewriting).
    rewrite: bool,
}

/// The sample type a `samples`/`count` profile takes: the period type's name.
#[derive(Clone, Copy, Debug)]
enum TimeType {
    Index(i32),
    /// The period type has no name; Pyroscope calls such profiles `cpu`.
    Cpu,
}

#[derive(Debug, Default)]
struct ProfilePlan {
    sample_unit: Option<Slot>,
    period_unit: Option<Slot>,
    /// Sample values are multiplied by this; 1 leaves them.
    multiplier: i64,
    /// `period` is multiplied by this; 1 leaves it.
    period_factor: i64,
    to_time: Option<TimeType>,
}

#[derive(Debug)]
struct AttributePlan {
    index: usize,
    slot: Slot,
    factor: i64,
}

#[derive(Debug, Default)]
struct Plan {
    /// One per profile, in document order.
    profiles: Vec<ProfilePlan>,
    /// One per attribute entry with a known unit.
    attributes: Vec<AttributePlan>,
    unknown: u64,
    /// `samples`/`count` profiles not turned into time: a sibling has it.
    to_time_skipped: u64,
    changes: bool,
}

impl Plan {
    /// What a call that changes nothing did.
    fn unchanged(&self) -> Outcome {
        Outcome {
            unknown_units: self.unknown,
            to_time_skipped: self.to_time_skipped,
            ..Outcome::default()
        }
    }
}

struct Planner<'a> {
    data: &'a ProfilesData,
    lookup: Lookup<'a>,
    opts: Options,
    /// Parsed unit per string index: each distinct string is parsed once.
    units: HashMap<i32, Option<Unit>>,
    plan: Plan,
    /// Time profiles of the scope being planned, as (lower-cased sample type
    /// name, `time_unix_nano`, `duration_nano`); built on the scope's first
    /// `samples`/`count` profile that would be turned into time.
    time_profiles: Option<HashSet<(String, u64, u64)>>,
}

impl<'a> Planner<'a> {
    fn new(data: &'a ProfilesData, opts: &Options) -> Self {
        Self {
            data,
            lookup: Lookup::of(data),
            opts: *opts,
            units: HashMap::new(),
            plan: Plan::default(),
            time_profiles: None,
        }
    }

    /// The unit at string index `i`; counts an unknown non-empty spelling.
    fn unit(&mut self, i: i32) -> Option<Unit> {
        let u = self.parsed(i);
        if u.is_none() && !self.lookup.string(i).is_empty() {
            self.plan.unknown += 1;
        }
        u
    }

    /// The unit at string index `i`, without counting it.
    fn parsed(&mut self, i: i32) -> Option<Unit> {
        let lookup = self.lookup;
        *self
            .units
            .entry(i)
            .or_insert_with(|| units::parse(lookup.string(i)))
    }

    fn slot(&mut self, old: i32, target: &'static str) -> Slot {
        let rewrite = self.lookup.string(old) != target;
        self.plan.changes |= rewrite;
        Slot {
            old,
            target,
            rewrite,
        }
    }

    fn plan(mut self) -> Plan {
        let scopes = self
            .data
            .resource_profiles
            .iter()
            .flat_map(|r| &r.scope_profiles);
        for scope in scopes {
            self.time_profiles = None;
            for p in &scope.profiles {
                let plan = self.profile(p, &scope.profiles);
                self.plan.profiles.push(plan);
            }
        }
        let attributes = self
            .data
            .dictionary
            .as_ref()
            .map_or(&[][..], |d| &d.attribute_table[..]);
        for (index, a) in attributes.iter().enumerate() {
            let Some(u) = self.unit(a.unit_strindex) else {
                continue;
            };
            let scale = self.opts.scale_to_base && a.value.as_ref().is_some_and(numeric);
            let (unit, factor) = if scale { (u.base(), u.factor) } else { (u, 1) };
            let slot = self.slot(a.unit_strindex, unit.name(self.opts.target));
            self.plan.changes |= factor != 1;
            self.plan.attributes.push(AttributePlan {
                index,
                slot,
                factor,
            });
        }
        self.plan
    }

    /// Whether `scope` (the profiles of `p`'s scope) holds a profile whose
    /// sample type is named `name` (ASCII case aside) in a unit of time and
    /// that covers `p`'s window (same `time_unix_nano` and `duration_nano`).
    /// That is how one recording with several sample types arrives: a pprof
    /// file becomes one Profile per sample type in one scope, each with the
    /// file's time and duration (profcol's pprof import, the Collector's
    /// `pkg/translator/pprof`), so a Go CPU profile's `samples`/`count`
    /// already has its time as the `cpu`/`nanoseconds` next to it.
    ///
    /// Per profile, never per sample: the scope's time profiles are indexed
    /// once, on its first candidate.
    fn has_time_sibling(&mut self, p: &Profile, scope: &[Profile], name: &str) -> bool {
        if self.time_profiles.is_none() {
            let mut set = HashSet::new();
            for q in scope {
                let Some(st) = q.sample_type else { continue };
                if self
                    .parsed(st.unit_strindex)
                    .is_some_and(|u| u.dimension == Dimension::Time)
                {
                    let ty = self.lookup.string(st.type_strindex).to_ascii_lowercase();
                    set.insert((ty, q.time_unix_nano, q.duration_nano));
                }
            }
            self.time_profiles = Some(set);
        }
        let key = (name.to_ascii_lowercase(), p.time_unix_nano, p.duration_nano);
        self.time_profiles
            .as_ref()
            .is_some_and(|set| set.contains(&key))
    }

    fn profile(&mut self, p: &Profile, scope: &[Profile]) -> ProfilePlan {
        let target = self.opts.target;
        let mut plan = ProfilePlan {
            multiplier: 1,
            period_factor: 1,
            ..ProfilePlan::default()
        };
        let period = p.period_type.map(|vt| (vt, self.unit(vt.unit_strindex)));
        if let Some((vt, Some(u))) = period {
            let (unit, factor) = if self.opts.scale_to_base {
                (u.base(), u.factor)
            } else {
                (u, 1)
            };
            plan.period_unit = Some(self.slot(vt.unit_strindex, unit.name(target)));
            plan.period_factor = factor;
        }
        let Some(st) = p.sample_type else {
            return self.finish(plan);
        };
        let Some(u) = self.unit(st.unit_strindex) else {
            return self.finish(plan);
        };
        let period_ns = match period {
            Some((_, Some(pu))) if pu.dimension == Dimension::Time && p.period > 0 => {
                Some(p.period.saturating_mul(pu.factor))
            }
            _ => None,
        };
        let counts_samples = u == units::COUNT
            && matches!(
                self.lookup
                    .string(st.type_strindex)
                    .to_ascii_lowercase()
                    .as_str(),
                "samples" | "sample"
            );
        // The time profile a conversion would make, unless the scope has it.
        let to_time = match (
            self.opts.samples_to_time && counts_samples,
            period_ns,
            period,
        ) {
            (true, Some(ns), Some((pt, _))) => {
                let name = self.lookup.string(pt.type_strindex);
                let (time_type, name) = if name.is_empty() {
                    (TimeType::Cpu, "cpu")
                } else {
                    (TimeType::Index(pt.type_strindex), name)
                };
                if self.has_time_sibling(p, scope, name) {
                    self.plan.to_time_skipped += 1;
                    None
                } else {
                    Some((ns, time_type))
                }
            }
            _ => None,
        };
        match to_time {
            Some((ns, time_type)) => {
                plan.sample_unit = Some(self.slot(st.unit_strindex, NANOSECOND.name(target)));
                plan.multiplier = ns;
                plan.to_time = Some(time_type);
            }
            None => {
                let (unit, factor) = if self.opts.scale_to_base {
                    (u.base(), u.factor)
                } else {
                    (u, 1)
                };
                plan.sample_unit = Some(self.slot(st.unit_strindex, unit.name(target)));
                plan.multiplier = factor;
            }
        }
        self.finish(plan)
    }

    fn finish(&mut self, plan: ProfilePlan) -> ProfilePlan {
        self.plan.changes |=
            plan.multiplier != 1 || plan.period_factor != 1 || plan.to_time.is_some();
        plan
    }
}

/// An integer or float attribute value, or a list of them: what a unit can scale.
fn numeric(v: &AnyValue) -> bool {
    match &v.value {
        Some(Value::IntValue(_) | Value::DoubleValue(_)) => true,
        Some(Value::ArrayValue(a)) => a
            .values
            .iter()
            .all(|x| matches!(x.value, Some(Value::IntValue(_) | Value::DoubleValue(_)))),
        _ => false,
    }
}

fn mul(v: i64, f: i64, saturated: &mut u64) -> i64 {
    v.checked_mul(f).unwrap_or_else(|| {
        *saturated += 1;
        v.saturating_mul(f)
    })
}

fn scale_value(v: &mut AnyValue, f: i64, saturated: &mut u64) {
    match &mut v.value {
        Some(Value::IntValue(i)) => *i = mul(*i, f, saturated),
        Some(Value::DoubleValue(d)) => *d *= f as f64,
        Some(Value::ArrayValue(a)) => a
            .values
            .iter_mut()
            .for_each(|x| scale_value(x, f, saturated)),
        _ => {}
    }
}

/// Multiplies every observation by `m`. A timestamp-only sample counts 1 per
/// timestamp in the sample type's unit, so it gets one value `m` per timestamp
/// (its number of observations stays the same).
fn scale_samples(samples: &mut [Sample], m: i64, saturated: &mut u64) {
    for s in samples {
        if s.values.is_empty() {
            s.values = vec![m; s.timestamps_unix_nano.len()];
        } else {
            s.values.iter_mut().for_each(|v| *v = mul(*v, m, saturated));
        }
    }
}

/// The string table while units are being rewritten.
struct Strings<'a> {
    table: &'a mut Vec<String>,
    /// Index of each target spelling present in the table.
    present: HashMap<&'static str, i32>,
    /// Strings some use was moved away from: they may be orphans now.
    left: Vec<i32>,
}

impl Strings<'_> {
    /// The index the use `slot` should point to.
    fn resolve(&mut self, slot: Slot) -> i32 {
        if self
            .table
            .get(slot.old as usize)
            .is_some_and(|s| s == slot.target)
        {
            return slot.old;
        }
        self.left.push(slot.old);
        self.index_of(slot.target)
    }

    fn index_of(&mut self, s: &'static str) -> i32 {
        if let Some(&i) = self.present.get(s) {
            return i;
        }
        if self.table.is_empty() {
            self.table.push(String::new());
        }
        let i = i32::try_from(self.table.len()).expect("string table over 2^31 entries");
        self.table.push(s.to_owned());
        self.present.insert(s, i);
        i
    }
}

fn apply(data: &mut ProfilesData, plan: Plan) -> Outcome {
    let mut out = Outcome {
        changed: true,
        ..plan.unchanged()
    };
    let ProfilesData {
        resource_profiles,
        dictionary,
    } = data;
    let dict = dictionary.get_or_insert_with(ProfilesDictionary::default);

    let slots: Vec<Slot> = plan
        .profiles
        .iter()
        .flat_map(|p| p.sample_unit.iter().chain(&p.period_unit))
        .chain(plan.attributes.iter().map(|a| &a.slot))
        .copied()
        .collect();
    let mut targets: HashMap<&'static str, i32> = slots.iter().map(|s| (s.target, -1)).collect();
    if plan
        .profiles
        .iter()
        .any(|p| matches!(p.to_time, Some(TimeType::Cpu)))
    {
        targets.insert("cpu", -1);
    }
    for (i, s) in dict.string_table.iter().enumerate() {
        if let Some(slot) = targets.get_mut(s.as_str()) {
            if *slot < 0 {
                *slot = i as i32;
            }
        }
    }
    targets.retain(|_, i| *i >= 0);
    let renames = in_place_renames(dict, resource_profiles, &slots, &targets);
    let mut strings = Strings {
        table: &mut dict.string_table,
        present: targets,
        left: Vec::new(),
    };
    for (k, t) in renames {
        // The old spelling may itself have been a target found at `k`.
        strings.present.retain(|_, i| *i != k);
        strings.table[k as usize] = t.to_owned();
        strings.present.insert(t, k);
    }

    for (p, pp) in profiles_mut(resource_profiles).zip(&plan.profiles) {
        if let (Some(vt), Some(slot)) = (&mut p.period_type, pp.period_unit) {
            out.units_rewritten += u64::from(slot.rewrite);
            vt.unit_strindex = strings.resolve(slot);
        }
        if let (Some(vt), Some(slot)) = (&mut p.sample_type, pp.sample_unit) {
            out.units_rewritten += u64::from(slot.rewrite);
            vt.unit_strindex = strings.resolve(slot);
            if let Some(t) = pp.to_time {
                let new = match t {
                    TimeType::Index(i) => i,
                    TimeType::Cpu => strings.index_of("cpu"),
                };
                if new != vt.type_strindex {
                    strings.left.push(vt.type_strindex);
                }
                vt.type_strindex = new;
                out.profiles_to_time += 1;
            }
        }
        if pp.period_factor != 1 {
            p.period = mul(p.period, pp.period_factor, &mut out.saturated);
        }
        if pp.multiplier != 1 {
            scale_samples(&mut p.samples, pp.multiplier, &mut out.saturated);
            out.profiles_scaled += 1;
        }
    }

    let mut attributes_changed = false;
    for ap in &plan.attributes {
        let unit = strings.resolve(ap.slot);
        let a = &mut dict.attribute_table[ap.index];
        attributes_changed |= unit != a.unit_strindex || ap.factor != 1;
        a.unit_strindex = unit;
        out.units_rewritten += u64::from(ap.slot.rewrite);
        if ap.factor != 1 {
            if let Some(v) = &mut a.value {
                scale_value(v, ap.factor, &mut out.saturated);
            }
            out.attributes_scaled += 1;
        }
    }
    let left = std::mem::take(&mut strings.left);
    if attributes_changed {
        reintern_attributes(dict, resource_profiles);
    }
    if !left.is_empty() {
        remove_orphans(dict, resource_profiles, left);
    }
    out
}

/// Strings that can simply be rewritten: every use is a unit slot wanting
/// the same new spelling, and that spelling is not in the table. Lowest
/// index first, so several spellings of one unit rename the first of them.
fn in_place_renames(
    dict: &ProfilesDictionary,
    resources: &[ResourceProfiles],
    slots: &[Slot],
    present: &HashMap<&'static str, i32>,
) -> Vec<(i32, &'static str)> {
    // None: uses of the string want different spellings.
    let mut wants: HashMap<i32, Option<&'static str>> = HashMap::new();
    for s in slots {
        wants
            .entry(s.old)
            .and_modify(|t| {
                if *t != Some(s.target) {
                    *t = None
                }
            })
            .or_insert(Some(s.target));
    }
    let mut candidates: Vec<(i32, &'static str)> = wants
        .into_iter()
        .filter_map(|(k, t)| Some((k, t?)))
        .filter(|&(k, t)| dict.string_table.get(k as usize).is_some_and(|s| s != t) && k != 0)
        .collect();
    if candidates.is_empty() {
        return candidates;
    }
    candidates.sort_unstable();

    // Uses outside unit slots pin a string to its spelling.
    let mut pinned = vec![false; dict.string_table.len()];
    string_uses(dict, resources, false, &mut |i| {
        if let Some(p) = pinned.get_mut(i as usize) {
            *p = true;
        }
    });

    let mut taken: HashMap<&'static str, i32> = HashMap::new();
    candidates.retain(|&(k, t)| {
        let free = !pinned[k as usize] && !present.contains_key(t) && !taken.contains_key(t);
        if free {
            taken.insert(t, k);
        }
        free
    });
    candidates
}

/// Interns the attribute table by value after some entries changed, so two
/// spellings of one unit end as one entry, and re-indexes references to it.
fn reintern_attributes(dict: &mut ProfilesDictionary, resources: &mut [ResourceProfiles]) {
    let table = std::mem::take(&mut dict.attribute_table);
    let mut interner = Interner::with_capacity(table.len());
    let map = table.into_iter().map(|a| interner.intern(a)).collect();
    dict.attribute_table = interner.into_values();
    let remap = Remap {
        attributes: TableRemap::from_vec(map),
        ..Remap::identity()
    };
    if !remap.is_identity() {
        remap.apply_to_dictionary(dict);
        remap.apply_to_resources(resources);
    }
}

/// Calls `f` with every string index used outside the samples (which refer
/// to no string): dictionary entries, resource and scope attributes, value
/// types; unit fields only if `units`.
fn string_uses(
    dict: &ProfilesDictionary,
    resources: &[ResourceProfiles],
    units: bool,
    f: &mut impl FnMut(i32),
) {
    let mut use_string = |t: Table, i: &i32| {
        if t == Table::String {
            f(*i)
        }
    };
    for m in &dict.mapping_table {
        visit::mapping(m, &mut use_string);
    }
    for x in &dict.function_table {
        visit::function(x, &mut use_string);
    }
    for a in &dict.attribute_table {
        use_string(Table::String, &a.key_strindex);
        if units {
            use_string(Table::String, &a.unit_strindex);
        }
        if let Some(v) = &a.value {
            visit::any_value(v, &mut use_string);
        }
    }
    for rp in resources {
        if let Some(r) = &rp.resource {
            visit::key_values(&r.attributes, &mut use_string);
        }
        for sp in &rp.scope_profiles {
            if let Some(s) = &sp.scope {
                visit::key_values(&s.attributes, &mut use_string);
            }
            for vt in sp
                .profiles
                .iter()
                .flat_map(|p| p.sample_type.iter().chain(&p.period_type))
            {
                use_string(Table::String, &vt.type_strindex);
                if units {
                    use_string(Table::String, &vt.unit_strindex);
                }
            }
        }
    }
}

/// Removes those of `left` (strings uses were moved away from) that nothing
/// uses any more, re-indexing the strings after them.
fn remove_orphans(
    dict: &mut ProfilesDictionary,
    resources: &mut [ResourceProfiles],
    left: Vec<i32>,
) {
    let mut orphan = vec![false; dict.string_table.len()];
    for i in left {
        if let Some(o) = orphan.get_mut(i as usize).filter(|_| i != 0) {
            *o = true;
        }
    }
    string_uses(dict, resources, true, &mut |i| {
        if let Some(o) = orphan.get_mut(i as usize) {
            *o = false;
        }
    });
    if !orphan.contains(&true) {
        return;
    }
    let keep: Vec<bool> = orphan.iter().map(|&o| !o).collect();
    retain_flagged(&mut dict.string_table, &keep);
    let remap = Remap {
        strings: TableRemap::compacting(&keep),
        ..Remap::identity()
    };
    remap.apply_to_dictionary(dict);
    let f = &mut |_: Table, i: &mut i32| *i = remap.strings.get(*i);
    for rp in resources {
        if let Some(r) = &mut rp.resource {
            visit::key_values_mut(&mut r.attributes, f);
        }
        for sp in &mut rp.scope_profiles {
            if let Some(s) = &mut sp.scope {
                visit::key_values_mut(&mut s.attributes, f);
            }
            for p in &mut sp.profiles {
                for vt in p.sample_type.iter_mut().chain(&mut p.period_type) {
                    vt.type_strindex = remap.strings.get(vt.type_strindex);
                    vt.unit_strindex = remap.strings.get(vt.unit_strindex);
                }
            }
        }
    }
}
