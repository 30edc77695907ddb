//! Applying the decisions: a read-only pass decides; only when something is
//! dropped is the batch mutated (an untouched batch keeps its received
//! encoding), then emptied profiles are removed and the dictionary
//! garbage-collected.

use profcol_model::dictionary::{gc, remove_empty_profiles, Lookup};
use profcol_pipeline::component::{ProcessContext, Verdict};
use profcol_prefetch::retain_ahead;

use crate::prefetch_sample;
use profcol_model::proto::Sample;
use profcol_model::{
    profile_sample_count, profiles, profiles_mut, sample_observations, ProfileBatch,
};

use super::config::SamplingMode;
use super::hash::HashSampler;
use super::identity;

/// Drop reasons: the hash said no, or there was nothing to hash and
/// `fail_closed` is set (the Collector's policy name for that case).
pub const SAMPLED_OUT: &str = "sampled_out";
pub const MISSING_RANDOMNESS: &str = "missing_randomness";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    Keep,
    SampledOut,
    Missing,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Sampling {
    pub sampler: HashSampler,
    pub mode: SamplingMode,
    pub fail_closed: bool,
}

impl Sampling {
    fn decide(&self, identity: Option<&[u8]>) -> Decision {
        match identity {
            None if self.fail_closed => Decision::Missing,
            None => Decision::Keep,
            Some(b) if self.sampler.keeps(b) => Decision::Keep,
            Some(_) => Decision::SampledOut,
        }
    }

    pub(crate) fn process(
        &self,
        batch: &mut ProfileBatch,
        ctx: &mut ProcessContext<'_>,
    ) -> Verdict {
        // Everything has an identity in session mode, so 100 % keeps all.
        if self.sampler.keeps_everything()
            && (self.mode == SamplingMode::Session || !self.fail_closed)
        {
            return Verdict::Keep;
        }
        match self.mode {
            SamplingMode::Session | SamplingMode::Profile => self.by_profile(batch, ctx),
            SamplingMode::Trace => self.by_link(batch, ctx),
        }
    }

    /// One decision per profile.
    fn by_profile(&self, batch: &mut ProfileBatch, ctx: &mut ProcessContext<'_>) -> Verdict {
        let data = batch.data();
        let lookup = Lookup::of(data);
        let mut decisions = Vec::new();
        for rp in &data.resource_profiles {
            let resource = match self.mode {
                SamplingMode::Session => identity::resource(&lookup, rp.resource.as_ref()),
                _ => Vec::new(),
            };
            for p in rp.scope_profiles.iter().flat_map(|s| &s.profiles) {
                decisions.push(match self.mode {
                    SamplingMode::Session => {
                        self.decide(Some(&identity::session(&lookup, p, &resource)))
                    }
                    _ => self.decide(identity::profile(p)),
                });
            }
        }
        if decisions.iter().all(|&d| d == Decision::Keep) {
            return Verdict::Keep;
        }
        let (mut sampled_out, mut missing) = (0, 0);
        for (p, d) in profiles(&batch.data().resource_profiles).zip(&decisions) {
            match d {
                Decision::Keep => {}
                Decision::SampledOut => sampled_out += profile_sample_count(p),
                Decision::Missing => missing += profile_sample_count(p),
            }
        }
        ctx.dropped(sampled_out, SAMPLED_OUT);
        ctx.dropped(missing, MISSING_RANDOMNESS);
        if decisions.iter().all(|&d| d != Decision::Keep) {
            return Verdict::Drop;
        }
        let data = batch.data_mut();
        for (p, d) in profiles_mut(&mut data.resource_profiles).zip(decisions) {
            if d != Decision::Keep {
                p.samples.clear();
            }
        }
        finish(batch)
    }

    /// One decision per link, applied to every sample.
    fn by_link(&self, batch: &mut ProfileBatch, ctx: &mut ProcessContext<'_>) -> Verdict {
        let data = batch.data();
        let links = &Lookup::of(data).dictionary().link_table;
        let mut per_link: Vec<Decision> = links
            .iter()
            .map(|l| self.decide(identity::trace(l)))
            .collect();
        let unlinked = self.decide(None);
        if per_link.is_empty() {
            per_link.push(unlinked);
        } else {
            // Index 0 is the null link: no trace.
            per_link[0] = unlinked;
        }
        let decide = |s: &Sample| {
            usize::try_from(s.link_index)
                .ok()
                .and_then(|i| per_link.get(i))
                .copied()
                .unwrap_or(unlinked)
        };
        let (mut sampled_out, mut missing, mut kept) = (0u64, 0u64, 0u64);
        for s in profiles(&data.resource_profiles).flat_map(|p| &p.samples) {
            let n = sample_observations(s);
            match decide(s) {
                Decision::Keep => kept += n,
                Decision::SampledOut => sampled_out += n,
                Decision::Missing => missing += n,
            }
        }
        if sampled_out == 0 && missing == 0 {
            return Verdict::Keep;
        }
        ctx.dropped(sampled_out, SAMPLED_OUT);
        ctx.dropped(missing, MISSING_RANDOMNESS);
        if kept == 0 {
            return Verdict::Drop;
        }
        for p in profiles_mut(&mut batch.data_mut().resource_profiles) {
            // Dropping a sample frees its blocks: fetched ahead.
            retain_ahead(&mut p.samples, |s, next| {
                next.inspect(|&n| prefetch_sample(n));
                decide(s) == Decision::Keep
            });
        }
        finish(batch)
    }
}

fn finish(batch: &mut ProfileBatch) -> Verdict {
    let data = batch.data_mut();
    remove_empty_profiles(data);
    gc(data);
    if batch.is_empty() {
        Verdict::Drop
    } else {
        Verdict::Keep
    }
}
