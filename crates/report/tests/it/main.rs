//! The report crate's integration tests, one binary with a module per topic:
//!
//! - `golden`: every renderer and chart on a stored report, byte for byte;
//! - `html`: the HTML report in headless Chromium (its charts, exports and flame graphs);
//! - `html_escaping`: a hostile string in every user string of the HTML report;
//! - `browser`: what the browser tests share (the fixtures, Chromium in a process group of
//!   its own, the DevTools protocol on a pipe).

mod browser;

mod golden;
mod html;
mod html_escaping;
