//! A resolved, human-readable view of a profile: folded stacks with sample attributes.
