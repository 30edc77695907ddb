//! Structural validation of a batch: every index in range, zero values at 0.
