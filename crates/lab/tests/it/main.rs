//! The lab's integration tests, one binary with a module per topic:
//!
//! - `servers`: every server kind rubyrace can start (Puma, Unicorn, Thin, WEBrick, a custom
//!   argv) serves every bundled app from the argv `experiment::servers` builds, started and
//!   stopped as the lab does it (`sys::process`).

mod servers;
