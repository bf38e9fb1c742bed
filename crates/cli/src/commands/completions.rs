//! `rubyrace completions SHELL` prints a shell's completion script, and the hidden
//! `rubyrace man DIR` writes the man pages (`rubyrace.1`, and `rubyrace-COMMAND.1` for each
//! command): both from the command line's own definition (clap_complete, clap_mangen), so
//! they never fall behind `--help`. The Debian package installs both (scripts/deb).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::CommandFactory;

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// The directory the pages are written into (made if need be).
    pub dir: PathBuf,
}

pub fn completions(args: CompletionsArgs) -> Result<ExitCode> {
    let mut command = crate::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "rubyrace", &mut script);
    crate::output::write_stdout(&String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}

pub fn man(args: ManArgs) -> Result<ExitCode> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let command = crate::Cli::command();
    write_page(command.clone(), &args.dir.join("rubyrace.1"))?;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        // A page's name is its file's: `rubyrace-run`, as `man rubyrace-run` finds it.
        let name: &'static str = Box::leak(format!("rubyrace-{}", sub.get_name()).into_boxed_str());
        // Its synopsis is the command as typed: `rubyrace run [OPTIONS] ...`.
        let page = sub
            .clone()
            .name(name)
            .bin_name(format!("rubyrace {}", sub.get_name()))
            .version(env!("RUBYRACE_VERSION_LONG"));
        write_page(page, &args.dir.join(format!("{name}.1")))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write_page(command: clap::Command, path: &Path) -> Result<()> {
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .with_context(|| format!("cannot render {}", path.display()))?;
    crate::output::write_file(path, &page)
}
