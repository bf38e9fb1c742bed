//! `rubyrace rubies`: the Rubies this machine has, as rubyrace finds them.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct RubiesArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn rubies(args: RubiesArgs) -> Result<ExitCode> {
    let found = rubies::discovery::discover();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&found)?);
        return Ok(ExitCode::SUCCESS);
    }
    if found.is_empty() {
        println!("No Ruby found on PATH or in rbenv, rvm, chruby, asdf or mise.");
        return Ok(ExitCode::from(1));
    }
    let width = found.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    let source_width = found
        .iter()
        .map(|r| r.source.len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!(
        "{:<width$}  {:<source_width$}  RUBY_DESCRIPTION / path",
        "name", "source"
    );
    for r in &found {
        let description = match (&r.description, &r.error) {
            (Some(d), _) => d.clone(),
            (None, Some(e)) => format!("(does not run: {})", e.lines().next().unwrap_or("")),
            (None, None) => "(unknown)".into(),
        };
        println!(
            "{:<width$}  {:<source_width$}  {description}",
            r.name, r.source
        );
        println!(
            "{:<width$}  {:<source_width$}  {}",
            "",
            "",
            r.path.display()
        );
    }
    println!("\nUse them in an experiment file: [rubies] NAME = \"PATH\" (docs/experiment.md).");
    Ok(ExitCode::SUCCESS)
}
