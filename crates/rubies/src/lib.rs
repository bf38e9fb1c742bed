//! The Rubies rubyrace runs: finding them on the machine (`discovery`: PATH, version
//! managers, rubyrace's own builds) and what each can do, building CRuby releases into a
//! cache (`build`, `cache`), the Ruby-level settings every experiment can vary (`knobs`:
//! JIT, allocator, compaction), the app servers rubyrace starts (`servers`), and the Ruby
//! support files (`support`).

pub mod build;
pub mod cache;
pub mod discovery;
pub mod knobs;
pub mod servers;
pub mod support;
