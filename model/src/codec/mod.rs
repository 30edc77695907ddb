//! `ProfilesData` to and from protobuf sooner than prost's generated code,
//! into and out of the same types, with prost's results byte for byte: a
//! batch that a processor changes is decoded and encoded once per request,
//! and that is most of what a pipeline of processors costs.

mod decode;
mod encode;
pub(crate) mod read;
mod resources;
#[cfg(test)]
mod tests;
pub(crate) mod write;

pub use decode::decode;
pub(crate) use decode::exact;
pub use encode::{encode, encoded_len};
pub use resources::{edit_resources, read_resources, retain_resources, Dropped, Edited};
