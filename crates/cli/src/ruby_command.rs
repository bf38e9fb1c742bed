//! `rubyrace ruby ...`: Ruby builds. (Being written; see issue 5.)

use std::process::ExitCode;

/// `rubyrace ruby` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum RubyCommand {}

pub fn run(command: RubyCommand) -> anyhow::Result<ExitCode> {
    match command {}
}
