//! What every other part stands on: the lease clock, the settings, whether
//! the library was preloaded, names and values as stored, and a ttl once
//! checked.

pub mod clock;
pub mod names;
pub mod preload;
pub mod settings;
pub mod ttl;
pub mod value;
