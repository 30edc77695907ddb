//! `exclude_topics`, as franz-go consumes for the Collector: with a
//! pattern among the topics (`^...`), every entry is a pattern, a topic is
//! consumed when one matches it and no exclusion does, and the brokers'
//! internal topics are left alone. librdkafka cannot leave topics out of
//! a pattern subscription, so profcol reads the brokers' topic list
//! itself, again every `metadata.refresh_interval`, and subscribes to the
//! topics that pass by name.

use regex::Regex;

#[derive(Debug, Clone)]
pub(super) struct TopicFilter {
    include: Vec<Regex>,
    exclude: Vec<Regex>,
}

impl TopicFilter {
    /// The filter of `topics` and `exclude` (checked at validate).
    pub(super) fn new(topics: &[String], exclude: &[String]) -> Result<Self, regex::Error> {
        let compile =
            |list: &[String]| list.iter().map(|p| Regex::new(p)).collect::<Result<_, _>>();
        Ok(Self {
            include: compile(topics)?,
            exclude: compile(exclude)?,
        })
    }

    /// The topics of `names` to consume, sorted. Patterns match anywhere in
    /// a name unless anchored, as Go's `MatchString`.
    pub(super) fn matching<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut out: Vec<String> = names
            .into_iter()
            .filter(|t| !t.starts_with("__"))
            .filter(|t| self.include.iter().any(|r| r.is_match(t)))
            .filter(|t| !self.exclude.iter().any(|r| r.is_match(t)))
            .map(str::to_owned)
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_include_and_exclusions_win() {
        let f = TopicFilter::new(
            &["^profiles-.*".into(), "audit".into()],
            &["^profiles-test$".into(), "-tmp".into()],
        )
        .unwrap();
        let got = f.matching([
            "profiles-a",
            "profiles-test",
            "profiles-test-2",
            "profiles-b-tmp",
            "x-audit-y",
            "logs",
            "__consumer_offsets",
            "profiles-a",
        ]);
        assert_eq!(got, ["profiles-a", "profiles-test-2", "x-audit-y"]);
    }
}
