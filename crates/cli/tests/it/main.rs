//! The integration tests of the `rubyrace` binary: one test binary (as ripgrep's
//! `tests/integration`), a module per topic, sharing `support`. Run one topic with
//! `cargo test -p rubyrace-cli --test it faults::`, one test with its full name.
//!
//! `make test` runs them with cargo-nextest, a process per test and as many at once as
//! there are CPUs. A test whose figures another test's load would change (the noise
//! record, the doctor's CPU sampling, the examples' boot deadlines, the fleet, the
//! bisections) takes every test thread, so nextest runs it alone: `.config/nextest.toml`
//! names them. Under plain `cargo test` they run beside the others and may fail for it.
//!
//! - `architecture`: the crates' layout rule (no import circle, dependencies as documented);
//! - `build`: `rubyrace ruby build` and `ruby list`;
//! - `commits`: commits as configurations (`ref` with `app_repo`);
//! - `doctor`: `rubyrace doctor`, cross-checked against /proc and getrlimit;
//! - `examples`: every ready-made experiment in smoke mode, and every study's README;
//! - `faults`: servers that crash, hang or answer garbage; signals; a full disk;
//! - `fleet`: `run --slurm` on a real Slurm cluster the tests start (support::slurm);
//! - `gemfile_app`: a `rails new` app with a Gemfile on PostgreSQL: flags through `bundle
//!   exec`, a server outside the app's bundle, `rubyrace gemfile`;
//! - `golden`: every output format on stored results, byte for byte;
//! - `interleave`: the interleaved and co-scheduled designs;
//! - `load`: `rubyrace load` against loopback servers;
//! - `noise`: the noise record, the quiet wait and the known-effect app;
//! - `one_writer`: one writer per results directory;
//! - `profile`: rbspy and perf on real servers and scripts;
//! - `readers`: `report`, `export` and `compare` against what users get wrong;
//! - `report`: `report` and `compare` on a real results directory;
//! - `ruby`: `jit`, `allocator` and `compact` checked in the running processes;
//! - `run`: `rubyrace run` end to end;
//! - `scenario`: user sessions;
//! - `scripts`: the repository's scripts no other test runs (`scripts/test-times`);
//! - `services`: real PostgreSQL and Redis;
//! - `soak`: the run for minutes (an hour with `make soak`) under seeded random faults;
//! - `tls`: HTTPS against a real Puma;
//! - `watch`: `rubyrace watch` beside a live run, and `run --live-report`.

mod support;

/// Headless Chromium as the report's browser tests run it: one module for both crates.
#[allow(dead_code)]
#[path = "../../../report/tests/it/browser/mod.rs"]
mod browser;

mod architecture;
mod bisect;
mod build;
mod check;
mod commits;
mod docs;
mod doctor;
mod examples;
mod faults;
mod fleet;
mod gemfile_app;
mod golden;
mod history;
mod init;
mod install;
mod interleave;
mod load;
mod noise;
mod one_writer;
mod profile;
mod readers;
mod report;
mod ruby;
mod run;
mod scenario;
mod scripts;
mod services;
mod soak;
mod tls;
mod version;
mod watch;
