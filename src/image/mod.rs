//! `siloc image`: from OCI image layouts to a content-addressed layer store and to
//! bundles whose `io.siloc.rootfs.layers` names the stored layers (DESIGN.md item 2
//! gets its layers from here).
//!
//! [`layout`] reads an image layout; [`unpack`] turns one layer tar into a directory
//! overlayfs can use as a lower layer, with [`whiteout`] converting the image-spec's
//! whiteouts; [`store`] keeps each layer once, keyed by diffID, and the images that
//! name them; [`import`] unpacks an image's missing layers in parallel; [`bundle`]
//! and [`user`] turn an image config into a runtime spec.
//! The formats are crates' (oci-spec, tar, flate2, zstd, sha2); the store and the
//! whiteout conversion are siloc's.

pub mod bundle;
pub mod digest;
pub mod import;
pub mod layout;
pub mod store;
pub mod unpack;
pub mod user;
pub mod whiteout;

/// Layer and layout builders shared with the integration tests.
#[cfg(test)]
#[path = "../../tests/common/oci.rs"]
pub(crate) mod testkit;
