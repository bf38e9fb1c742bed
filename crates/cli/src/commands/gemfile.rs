//! `rubyrace gemfile`: writes a Gemfile of the experiment's own that loads an app's Gemfile
//! and adds the app server rubyrace starts, for an app whose bundle lacks it (the check
//! before a run points here). The writing is `experiment::gemfile`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use experiment::gemfile::{write_server_gemfile, DEFAULT_NAME};
use experiment::servers::ServerKind;

#[derive(Args, Debug)]
#[command(after_help = "Example:
  rubyrace gemfile ~/src/my-app --server puma -o Gemfile.rubyrace
  BUNDLE_GEMFILE=$PWD/Gemfile.rubyrace ruby -S bundle install
  # then, in the experiment: gemfile = \"Gemfile.rubyrace\"

The app is not edited. See docs/ruby.md#a-server-that-is-not-in-the-apps-bundle.")]
pub struct GemfileArgs {
    /// The app's directory (the one holding its Gemfile and config.ru).
    #[arg(value_name = "APP_DIR")]
    pub app: PathBuf,
    /// The server whose gem to add: puma, unicorn, thin or webrick (rack's rackup).
    #[arg(long, default_value = "puma", value_name = "SERVER")]
    pub server: String,
    /// The Gemfile to write (it must not exist); its lock file is FILE.lock.
    #[arg(short, long, default_value = DEFAULT_NAME, value_name = "FILE")]
    pub output: PathBuf,
}

pub fn gemfile(args: GemfileArgs) -> Result<ExitCode> {
    let Some(server) = ServerKind::parse(&args.server).filter(|k| k.gem().is_some()) else {
        let names: Vec<&str> = ServerKind::built_in().map(|(k, _)| k.as_str()).collect();
        eprintln!(
            "rubyrace: error: --server {:?}: expected one of {}",
            args.server,
            names.join(", ")
        );
        return Ok(ExitCode::from(2));
    };
    let written = match write_server_gemfile(&args.app, server, &args.output) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("rubyrace: error: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let path = std::path::absolute(&written.path).unwrap_or(written.path.clone());
    println!(
        "wrote {}: {}'s Gemfile plus gem {:?}",
        path.display(),
        args.app.display(),
        written.gem
    );
    if let Some(lock) = &written.lock_seeded_from {
        println!(
            "its lock file starts as a copy of {} (the app's versions are kept)",
            lock.display()
        );
    }
    println!("next: BUNDLE_GEMFILE={} ruby -S bundle install   (or `bundle lock --local` with the gems already installed)", path.display());
    println!(
        "then, in the experiment: gemfile = {:?}",
        path.display().to_string()
    );
    Ok(ExitCode::SUCCESS)
}
