//! A Gemfile of the experiment's own that adds an app server to an app's bundle without
//! editing the app (`rubyrace gemfile`): the app's Gemfile through `eval_gemfile`, then the
//! server's gem. An app whose Gemfile has no puma (it deploys on another server, or leaves
//! the server to the platform) cannot be started with `bundle exec puma`; the check before
//! a run says so and points here (docs/ruby.md#a-server-that-is-not-in-the-apps-bundle).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use crate::servers::{server_executable, ServerKind};

/// The file name `rubyrace gemfile` writes by default, next to the experiment file.
pub const DEFAULT_NAME: &str = "Gemfile.rubyrace";

/// What [`write_server_gemfile`] wrote.
#[derive(Debug, PartialEq, Eq)]
pub struct WrittenGemfile {
    /// The Gemfile written.
    pub path: PathBuf,
    /// Its lock file, seeded with a copy of the app's `Gemfile.lock` (so Bundler keeps the
    /// app's versions and only adds the server), when the app has one.
    pub lock_seeded_from: Option<PathBuf>,
    /// The gem added.
    pub gem: &'static str,
}

/// The text of the Gemfile: the app's Gemfile (absolute, so the file can live anywhere;
/// Bundler resolves the app Gemfile's own relative paths, `path:` and `gemspec`, from the
/// app's directory) and the server's gem.
pub fn server_gemfile_text(app_gemfile: &Path, gem: &str) -> String {
    format!(
        "# Written by `rubyrace gemfile`: the app's Gemfile, unchanged, plus the app server\n\
         # rubyrace starts, which the app's bundle does not have. Name this file in the\n\
         # experiment (gemfile = \"...\"); install with BUNDLE_GEMFILE=<this file> bundle install.\n\
         eval_gemfile {:?}\n\
         gem {gem:?}\n",
        app_gemfile.display().to_string()
    )
}

/// Writes `out` (refusing to overwrite it): a Gemfile that loads `app_dir`'s Gemfile and adds
/// the gem of `server`; and `out.lock`, a copy of the app's `Gemfile.lock`, when the app has
/// one and `out.lock` does not exist. Errors: a custom server, an app directory without a
/// Gemfile, an existing `out`, a file that cannot be written.
pub fn write_server_gemfile(
    app_dir: &Path,
    server: ServerKind,
    out: &Path,
) -> anyhow::Result<WrittenGemfile> {
    let Some((_, gem)) = server_executable(server) else {
        bail!("server = \"custom\" starts a command of yours; add its gem to a Gemfile yourself");
    };
    let app_gemfile = app_dir.join("Gemfile");
    if !app_gemfile.is_file() {
        bail!("no Gemfile in {}", app_dir.display());
    }
    let app_gemfile = app_gemfile.canonicalize().unwrap_or(app_gemfile);
    if out.exists() {
        bail!(
            "{} exists; remove it or give another path with -o",
            out.display()
        );
    }
    std::fs::write(out, server_gemfile_text(&app_gemfile, gem))
        .with_context(|| format!("cannot write {}", out.display()))?;
    let app_lock = app_gemfile.with_file_name("Gemfile.lock");
    let lock = PathBuf::from(format!("{}.lock", out.display()));
    let lock_seeded_from = if app_lock.is_file() && !lock.exists() {
        std::fs::copy(&app_lock, &lock)
            .with_context(|| format!("cannot copy {} to {}", app_lock.display(), lock.display()))?;
        Some(app_lock)
    } else {
        None
    };
    Ok(WrittenGemfile {
        path: out.to_path_buf(),
        lock_seeded_from,
        gem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gemfile_loads_the_apps_and_adds_the_server() {
        let dir = tempfile::tempdir().unwrap();
        let app = dir.path().join("app");
        std::fs::create_dir(&app).unwrap();
        let out = dir.path().join(DEFAULT_NAME);
        let err = write_server_gemfile(&app, ServerKind::Puma, &out).unwrap_err();
        assert_eq!(err.to_string(), format!("no Gemfile in {}", app.display()));
        std::fs::write(app.join("Gemfile"), "gem \"rack\"\n").unwrap();
        std::fs::write(app.join("Gemfile.lock"), "GEM\n").unwrap();
        let written = write_server_gemfile(&app, ServerKind::Webrick, &out).unwrap();
        assert_eq!(written.gem, "rack");
        let text = std::fs::read_to_string(&out).unwrap();
        let app_gemfile = app.canonicalize().unwrap().join("Gemfile");
        assert!(
            text.ends_with(&format!(
                "eval_gemfile {:?}\ngem \"rack\"\n",
                app_gemfile.display().to_string()
            )),
            "{text}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("Gemfile.rubyrace.lock")).unwrap(),
            "GEM\n"
        );
        let again = write_server_gemfile(&app, ServerKind::Puma, &out).unwrap_err();
        assert!(again.to_string().contains("exists"), "{again}");
        assert!(write_server_gemfile(&app, ServerKind::Custom, &dir.path().join("x")).is_err());
    }
}
