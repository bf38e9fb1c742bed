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
    let mut table = comfy_table::Table::new();
    table
        .load_preset(comfy_table::presets::NOTHING)
        .set_header(["name", "source", "RUBY_DESCRIPTION / path"]);
    for r in &found {
        let description = match (&r.description, &r.error) {
            (Some(d), _) => d.clone(),
            (None, Some(e)) => format!("(does not run: {})", e.lines().next().unwrap_or("")),
            (None, None) => "(unknown)".into(),
        };
        table.add_row([
            r.name.clone(),
            r.source.clone(),
            format!("{description}\n{}", r.path.display()),
        ]);
    }
    for column in 0..3 {
        if let Some(c) = table.column_mut(column) {
            // Two spaces between columns, none before the first.
            c.set_padding((0, if column == 2 { 0 } else { 2 }));
        }
    }
    println!("{}", table.trim_fmt());
    println!("\nUse them in an experiment file: [rubies] NAME = \"PATH\" (docs/experiment.md).");
    Ok(ExitCode::SUCCESS)
}
