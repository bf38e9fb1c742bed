//! One module per command (`compare` lives with `report`, whose options it shares): each
//! parses its arguments, calls the crates that do the work, and prints.

pub mod bisect;
pub mod check;
pub mod ci_workflow;
pub mod completions;
pub mod demo;
pub mod doctor;
pub mod export;
pub mod fleet;
pub mod gemfile;
pub mod history;
pub mod init;
pub mod load;
pub mod profile;
pub mod report;
pub mod rubies;
pub mod ruby;
pub mod run;
pub mod trial;
pub mod watch;
