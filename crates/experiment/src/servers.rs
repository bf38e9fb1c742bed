//! How each app server is started: the argv, environment and working directory of one
//! server process, built from the Ruby, the app, the port and the concurrency of a trial.
//!
//! Every server is started *through the chosen Ruby*, as `<ruby prefix...> -S <server> ...`,
//! so that the interpreter and its flags (`--yjit`, ...) are the ones under test and the
//! server's gems are that Ruby's gems. `-S` makes Ruby look the script up in `RUBYPATH`, then
//! in `PATH`; [`server_command`] sets `RUBYPATH` to the directory of the Ruby executable, which
//! is where that Ruby's RubyGems stubs live (Debian: `/usr/bin`; rbenv, rvm, ruby-install:
//! `<prefix>/bin`), so another Ruby's stub earlier in `PATH` is not picked. `-S` is used instead
//! of `-e 'load Gem.bin_path("puma", "puma")'` because Debian's unicorn package installs its
//! script only as `/usr/bin/unicorn`, not inside the gem directory, where `Gem.bin_path`
//! looks; `-S` finds every server of the Debian packages (puma, unicorn, thin, rackup).
//!
//! | kind    | processes | threads | argv after `<ruby> -S` (app = `<app_dir>/config.ru`)                 |
//! |---------|-----------|---------|------------------------------------------------------------------------|
//! | puma    | n         | n       | `puma -C <scratch>/puma.rb -b tcp://127.0.0.1:P -e ENV -t T:T [-w N] -q app` |
//! | unicorn | n         | 1       | `unicorn -c <scratch>/unicorn.conf.rb -E ENV app`                      |
//! | thin    | 1         | n       | `thin start -a 127.0.0.1 -p P -e ENV -R app [--threaded --threadpool-size T]` |
//! | webrick | 1         | 1       | `rackup -s webrick -E ENV -o 127.0.0.1 -p P -q app`                    |
//! | custom  | {processes} | {threads} | the user's argv with placeholders expanded                       |
//!
//! * Puma runs in single mode for one process (no `-w`) and in cluster mode (`-w N`)
//!   otherwise, with `--preload` only for `preload = true` (the master loads the app, then
//!   forks); `-C` with an empty generated config keeps an app's `config/puma.rb` from
//!   overriding the trial's settings (Puma 4, Debian bullseye's, has no `--no-config`); no
//!   control app; `-q`: no request log.
//! * Unicorn takes its settings from a config file generated in the trial's scratch directory
//!   (`worker_processes`, `listen`, `timeout`, `preload_app`); each worker is single-threaded.
//! * Thin is one EventMachine process. With `threads` = 1 it calls the app on the reactor
//!   thread; with more, `--threaded --threadpool-size T` calls it from a pool of T threads
//!   (marked "experimental" by thin). Its `--servers` cluster mode would listen on one port
//!   per process, which is not one server on one port, so processes must be 1.
//! * WEBrick (through rackup) serves each connection on its own thread, up to its
//!   `MaxClients` (100): there is no thread count to set, so processes and threads must be
//!   1. Rackup's defaults turn WEBrick's access log off.
//! * With a Gemfile (`bundle_exec`), `-S <server>` becomes `-S bundle exec <server>`, and the
//!   Ruby's flags (`--yjit`, `--mjit`, `ruby_opts`...) also go into `RUBYOPT`
//!   ([`ServerCommand::rubyopt`]): Bundler loads the server's executable into its own
//!   process only when the executable's shebang is `#!/usr/bin/env ruby` or `Gem.ruby`'s;
//!   otherwise it execs a new Ruby, which keeps the environment but not the command line
//!   (Debian's `/usr/bin/puma` says `#!/usr/bin/ruby` where `Gem.ruby` is `/usr/bin/ruby3.1`,
//!   so `ruby --yjit -S bundle exec puma` served without YJIT). The check before the run
//!   starts that same command with `--version` ([`server_check_command`]) and asks the Ruby
//!   that runs the executable which JITs are on.
//! * Every built-in server binds `host` only: 127.0.0.1, or on a fleet with a separate load
//!   host the node's routable address (docs/fleet.md). Every server, custom ones too, gets
//!   `RACK_ENV`, `RAILS_ENV` and `APP_ENV` (Sinatra) set to the environment, besides the
//!   server's own environment flag, and `RUBYPATH` when the Ruby is given as an absolute path.
//!
//! Stopping: the caller starts the command in its own process group and sends SIGTERM to the
//! group (then SIGKILL after a grace period). Measured on Debian 12 (2 cores, Ruby 3.1) with
//! the bundled apps, idle or holding idle keep-alive connections, from SIGTERM to the whole
//! group gone: puma single mode 2-30 ms, puma cluster ~0.2 s, unicorn ~0.1 s, WEBrick 15-200 ms,
//! thin 0.5-1 s (thin handles signals on a 1 s timer, then stops gracefully).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};

pub use rubies::servers::ServerKind;

/// Everything needed to build one server's command.
#[derive(Clone, Debug)]
pub struct ServerLaunch<'a> {
    pub kind: ServerKind,
    /// The Ruby's argv prefix, e.g. `["/usr/bin/ruby", "--yjit"]`.
    pub ruby: &'a [String],
    /// The directory holding the app's `config.ru`; the server's working directory.
    pub app_dir: &'a Path,
    /// The address to listen on: 127.0.0.1, or the node's routable address when the load
    /// comes from another host (`[fleet] load = "separate"`).
    pub host: std::net::IpAddr,
    /// The port to listen on. Never 0: pick the port before.
    pub port: u16,
    pub processes: u32,
    pub threads: u32,
    /// A per-trial directory rubyrace owns, for generated files (unicorn's config). Created
    /// if missing.
    pub scratch_dir: &'a Path,
    /// For [`ServerKind::Custom`]: the user's argv with placeholders (see [`server_command`]).
    pub custom_argv: &'a [String],
    /// The Rack environment, normally "production".
    pub environment: &'a str,
    /// Start the server through `bundle exec` (a Gemfile is in use; BUNDLE_GEMFILE is set
    /// by the caller). Custom argvs are left as written.
    pub bundle_exec: bool,
    /// `tls = true` (Puma only): the certificate and key files of an `ssl://` bind.
    pub tls: Option<(&'a Path, &'a Path)>,
    /// `preload = true` (Puma and unicorn with workers): the master loads the app before
    /// forking.
    pub preload: bool,
}

/// A server command, ready for `std::process::Command` (no shell involved).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerCommand {
    /// Program first, then its arguments.
    pub argv: Vec<String>,
    /// Variables to set on top of the inherited environment.
    pub env: Vec<(String, String)>,
    /// The working directory: the app directory.
    pub cwd: PathBuf,
    /// With a Gemfile: the Ruby's flags (everything after the executable in the Ruby's
    /// argv), to be put in front of the server's `RUBYOPT` (after the probe's `-r`, before
    /// any RUBYOPT of the user's, see [`prepend_rubyopt`]), so that a Ruby that `bundle
    /// exec` starts anew has them too. None without a Gemfile or without flags.
    pub rubyopt: Option<String>,
}

/// The name of the unicorn config file written into the scratch directory.
pub const UNICORN_CONFIG: &str = "unicorn.conf.rb";

/// The name of the (empty) Puma config file written into the scratch directory.
pub const PUMA_CONFIG: &str = "puma.rb";
const PUMA_CONFIG_TEXT: &str =
    "# Generated by rubyrace for one trial (puma -C): no settings, so that the\n\
     # app's config/puma.rb cannot override the trial's; everything is on the command line.\n";

/// Unicorn's `timeout`: a worker busy with one request for longer is killed and replaced.
/// Unicorn's own default; far above any request of the bundled apps.
pub const UNICORN_TIMEOUT_SECS: u32 = 60;

/// The placeholders of a custom server argv.
pub const PLACEHOLDERS: [&str; 6] = [
    "{ruby}",
    "{host}",
    "{port}",
    "{app}",
    "{processes}",
    "{threads}",
];

/// Builds the command that starts `launch.kind` serving the app on `host`:`port` (see the
/// module documentation for each server's argv). For unicorn it also writes
/// `<scratch_dir>/unicorn.conf.rb`.
///
/// Custom argvs take these placeholders:
/// * `{ruby}`: the Ruby's argv prefix, as separate arguments; only as a whole argument.
/// * `{host}` (the address to listen on, 127.0.0.1 unless the load comes from another
///   host), `{port}`, `{app}` (the app directory), `{processes}`, `{threads}`: replaced
///   anywhere inside an argument, e.g. `http://{host}:{port}` or `{app}/config.ru`.
///
/// A custom argv must mention `{port}` (rubyrace picks the port), and `{processes}` or
/// `{threads}` when that count is above 1 (or the setting would be silently ignored). Any
/// other `{name}` is an error, to catch typos; other braces (`{ |x| x }`) are left alone.
///
/// Errors: an empty Ruby prefix, port 0, a zero count, an empty environment, a count the
/// server does not support (e.g. unicorn with threads > 1), a bad custom argv, or a scratch
/// directory that cannot be written.
pub fn server_command(launch: &ServerLaunch) -> anyhow::Result<ServerCommand> {
    let kind = launch.kind;
    if launch.port == 0 {
        bail!("{kind}: port 0 is not a port to listen on; pick a free port first");
    }
    if launch.processes == 0 || launch.threads == 0 {
        bail!(
            "{kind}: processes and threads must be at least 1 (got processes = {}, threads = {})",
            launch.processes,
            launch.threads
        );
    }
    if launch.tls.is_some() && kind != ServerKind::Puma {
        bail!("{kind}: tls = true starts Puma with an ssl:// bind; it is not supported for {kind}");
    }
    if launch.environment.is_empty() {
        bail!("{kind}: the environment (RACK_ENV) is empty");
    }
    if launch.processes > 1 && !kind.supports_processes() {
        bail!(
            "{kind} runs a single process, so processes must be 1 (got {}){}",
            launch.processes,
            match kind {
                ServerKind::Thin =>
                    "; thin's --servers starts one process per port, not one server",
                _ => "",
            }
        );
    }
    if launch.threads > 1 && !kind.supports_threads() {
        bail!(
            "{kind} does not take a thread count, so threads must be 1 (got {}): {}",
            launch.threads,
            match kind {
                ServerKind::Unicorn =>
                    "unicorn workers are single-threaded; use processes for concurrency",
                _ => "WEBrick starts a thread per connection (up to 100) on its own",
            }
        );
    }
    if kind != ServerKind::Custom && launch.ruby.is_empty() {
        bail!("{kind}: no Ruby given (the Ruby argv prefix is empty)");
    }

    let port = launch.port.to_string();
    let host = launch.host.to_string();
    // `host:port`, with an IPv6 address in brackets.
    let host_port = std::net::SocketAddr::from((launch.host, launch.port)).to_string();
    let config_ru = launch.app_dir.join("config.ru");
    let config_ru = path_string(&config_ru)?;
    let env = launch.environment.to_string();
    let mut argv: Vec<String> = Vec::new();
    // A built-in kind's executable (its gem's, `ServerKind::gem`), run by the Ruby.
    let via_ruby = || {
        let executable = kind.gem().map_or("", |g| g.executable);
        through_ruby(launch.ruby, launch.bundle_exec, executable)
    };

    match kind {
        ServerKind::Puma => {
            argv.extend(via_ruby());
            let config = write_scratch_file(launch, PUMA_CONFIG, PUMA_CONFIG_TEXT)?;
            argv.push("-C".to_string());
            argv.push(path_string(&config)?);
            argv.push("-b".to_string());
            argv.push(match launch.tls {
                // Puma's query syntax; no client certificates.
                Some((cert, key)) => format!(
                    "ssl://{host_port}?key={}&cert={}&verify_mode=none",
                    path_string(key)?,
                    path_string(cert)?
                ),
                None => format!("tcp://{host_port}"),
            });
            argv.extend(strings(&["-e", &env, "-t"]));
            argv.push(format!("{0}:{0}", launch.threads));
            if launch.processes > 1 {
                argv.push("-w".to_string());
                argv.push(launch.processes.to_string());
                if launch.preload {
                    argv.push("--preload".to_string());
                }
            }
            argv.push("-q".to_string());
            argv.push(config_ru);
        }
        ServerKind::Unicorn => {
            let config = write_unicorn_config(launch)?;
            argv.extend(via_ruby());
            argv.push("-c".to_string());
            argv.push(path_string(&config)?);
            argv.extend(strings(&["-E", &env]));
            argv.push(config_ru);
        }
        ServerKind::Thin => {
            argv.extend(via_ruby());
            argv.extend(strings(&[
                "start", "-a", &host, "-p", &port, "-e", &env, "-R",
            ]));
            argv.push(config_ru);
            if launch.threads > 1 {
                argv.extend(strings(&["--threaded", "--threadpool-size"]));
                argv.push(launch.threads.to_string());
            }
        }
        ServerKind::Webrick => {
            argv.extend(via_ruby());
            argv.extend(strings(&[
                "-s", "webrick", "-E", &env, "-o", &host, "-p", &port, "-q",
            ]));
            argv.push(config_ru);
        }
        ServerKind::Custom => argv = expand_custom(launch)?,
    }

    let vars = server_env(launch.ruby, &env)?;
    let rubyopt = match launch.bundle_exec {
        true => carried_rubyopt(launch.ruby)?,
        false => None,
    };
    Ok(ServerCommand {
        argv,
        env: vars,
        cwd: launch.app_dir.to_path_buf(),
        rubyopt,
    })
}

/// The variables every server gets: the environment's name for Rack, Rails and Sinatra, and
/// `RUBYPATH` (where `-S` looks first) when the Ruby is given by an absolute path.
fn server_env(ruby: &[String], environment: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut vars = vec![
        ("RACK_ENV".to_string(), environment.to_string()),
        ("RAILS_ENV".to_string(), environment.to_string()),
        ("APP_ENV".to_string(), environment.to_string()),
    ];
    if let Some(dir) = ruby.first().and_then(|r| ruby_bin_dir(r)) {
        vars.push(("RUBYPATH".to_string(), path_string(&dir)?));
    }
    Ok(vars)
}

/// `<ruby...> -S [bundle exec] <executable>`: how every built-in server is started.
fn through_ruby(ruby: &[String], bundle_exec: bool, executable: &str) -> Vec<String> {
    let mut v = ruby.to_vec();
    v.push("-S".to_string());
    if bundle_exec {
        v.push("bundle".to_string());
        v.push("exec".to_string());
    }
    v.push(executable.to_string());
    v
}

/// The Ruby's flags (its argv after the executable) as `RUBYOPT` text, so that they reach
/// a Ruby that `bundle exec` execs; None when there are none. RUBYOPT splits on spaces, so
/// a flag holding whitespace cannot be carried and is an error. Whether the Ruby accepts a
/// flag in RUBYOPT (it refuses `-e`, `-x`, `--dump`...) is asked of the Ruby itself by the
/// check before the run ([`server_check_command`]).
pub fn carried_rubyopt(ruby: &[String]) -> anyhow::Result<Option<String>> {
    let flags = ruby.get(1..).unwrap_or_default();
    if let Some(bad) = flags
        .iter()
        .find(|f| f.is_empty() || f.chars().any(char::is_whitespace))
    {
        bail!(
            "the Ruby option {bad:?} holds a space (or is empty), so RUBYOPT cannot carry it \
             through `bundle exec`"
        );
    }
    Ok((!flags.is_empty()).then(|| flags.join(" ")))
}

/// `flags` in front of an existing RUBYOPT (the user's, if any).
pub fn prepend_rubyopt(flags: &str, existing: Option<&str>) -> String {
    match existing.map(str::trim).filter(|e| !e.is_empty()) {
        Some(e) => format!("{flags} {e}"),
        None => flags.to_string(),
    }
}

/// The executable a built-in server is started as (`-S <executable>`) and the gem it
/// belongs to; None for a custom server. WEBrick runs through rack's `rackup`.
pub fn server_executable(kind: ServerKind) -> Option<(&'static str, &'static str)> {
    kind.gem().map(|gem| (gem.executable, gem.name))
}

/// The check of a built-in server under a Gemfile: the trial's own command up to the
/// server's executable, then `--version` (which each of puma, unicorn, thin and rackup
/// answers, then exits), with the trial's variables, working directory and RUBYOPT flags,
/// so the same Bundler, shebang and exec decide which Ruby runs it. None for a custom
/// server.
pub fn server_check_command(
    kind: ServerKind,
    ruby: &[String],
    app_dir: &Path,
    environment: &str,
) -> anyhow::Result<Option<ServerCommand>> {
    let Some((executable, _)) = server_executable(kind) else {
        return Ok(None);
    };
    if ruby.is_empty() {
        bail!("{kind}: no Ruby given (the Ruby argv prefix is empty)");
    }
    let mut argv = through_ruby(ruby, true, executable);
    argv.push("--version".to_string());
    Ok(Some(ServerCommand {
        argv,
        env: server_env(ruby, environment)?,
        cwd: app_dir.to_path_buf(),
        rubyopt: carried_rubyopt(ruby)?,
    }))
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Paths go into argv as UTF-8 strings; a path that is not UTF-8 is refused rather than
/// mangled.
fn path_string(path: &Path) -> anyhow::Result<String> {
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow!("path {} is not valid UTF-8", path.display()))
}

/// The directory whose scripts `ruby -S` should prefer: the directory of the Ruby
/// executable, symlinks resolved (`/usr/bin/ruby` -> `/usr/bin/ruby3.1`; a link to
/// `/opt/rubies/3.3.0/bin/ruby` -> `/opt/rubies/3.3.0/bin`), as given if it cannot be
/// resolved. None for a bare name found through PATH ("ruby").
fn ruby_bin_dir(ruby: &str) -> Option<PathBuf> {
    let path = Path::new(ruby);
    if !path.is_absolute() {
        return None;
    }
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    resolved.parent().map(Path::to_path_buf)
}

/// Unicorn's config: the only place unicorn takes its worker count. The values are numbers
/// and a fixed address, so nothing needs quoting.
fn unicorn_config(launch: &ServerLaunch) -> String {
    format!(
        "# Generated by rubyrace for one trial (unicorn -c).\n\
         worker_processes {}\n\
         listen \"{}\"\n\
         timeout {}\n\
         preload_app {}\n",
        launch.processes,
        std::net::SocketAddr::from((launch.host, launch.port)),
        UNICORN_TIMEOUT_SECS,
        launch.preload
    )
}

fn write_unicorn_config(launch: &ServerLaunch) -> anyhow::Result<PathBuf> {
    write_scratch_file(launch, UNICORN_CONFIG, &unicorn_config(launch))
}

/// Writes a generated server config into the trial's scratch directory.
fn write_scratch_file(launch: &ServerLaunch, name: &str, text: &str) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(launch.scratch_dir).with_context(|| {
        format!(
            "cannot create the scratch directory {}",
            launch.scratch_dir.display()
        )
    })?;
    let path = launch.scratch_dir.join(name);
    std::fs::write(&path, text)
        .with_context(|| format!("cannot write the server config {}", path.display()))?;
    Ok(path)
}

/// Expands the placeholders of a custom argv (see [`server_command`]).
fn expand_custom(launch: &ServerLaunch) -> anyhow::Result<Vec<String>> {
    let user = launch.custom_argv;
    if user.is_empty() {
        bail!(
            "custom: the server argv is empty; give the command, e.g. \
             [\"{{ruby}}\", \"-S\", \"falcon\", \"serve\", \"--bind\", \"http://{{host}}:{{port}}\"]"
        );
    }
    let mentions = |p: &str| user.iter().any(|a| a.contains(p));
    if !mentions("{port}") {
        bail!("custom: the server argv does not mention {{port}}; the server must listen on the port rubyrace picks");
    }
    if launch.processes > 1 && !mentions("{processes}") {
        bail!(
            "custom: processes = {} but the server argv does not mention {{processes}}, so the setting would be ignored",
            launch.processes
        );
    }
    if launch.threads > 1 && !mentions("{threads}") {
        bail!(
            "custom: threads = {} but the server argv does not mention {{threads}}, so the setting would be ignored",
            launch.threads
        );
    }
    if !launch.host.is_loopback() && !mentions("{host}") {
        bail!(
            "custom: the load comes from another host, so the server must listen on {}, but the server argv does not mention {{host}}",
            launch.host
        );
    }
    let app = path_string(launch.app_dir)?;
    let values = [
        ("{host}", launch.host.to_string()),
        ("{port}", launch.port.to_string()),
        ("{app}", app),
        ("{processes}", launch.processes.to_string()),
        ("{threads}", launch.threads.to_string()),
    ];
    let mut argv = Vec::with_capacity(user.len() + launch.ruby.len());
    for arg in user {
        if arg == "{ruby}" {
            if launch.ruby.is_empty() {
                bail!("custom: the server argv uses {{ruby}} but no Ruby was given");
            }
            argv.extend(launch.ruby.iter().cloned());
            continue;
        }
        if arg.contains("{ruby}") {
            bail!(
                "custom: {{ruby}} must be an argument on its own (it expands to several arguments), not part of {arg:?}"
            );
        }
        if let Some(unknown) = unknown_placeholder(arg) {
            bail!(
                "custom: unknown placeholder {unknown} in {arg:?}; the placeholders are {}",
                PLACEHOLDERS.join(", ")
            );
        }
        let mut out = arg.clone();
        for (name, value) in &values {
            out = out.replace(name, value);
        }
        argv.push(out);
    }
    Ok(argv)
}

/// The first `{name}` in `arg` (name: a letter or `_`, then letters, digits, `_`) that is not
/// a placeholder.
fn unknown_placeholder(arg: &str) -> Option<&str> {
    first_unknown_placeholder(arg, &PLACEHOLDERS)
}

/// The first `{name}` in `arg` that is not one of `known`; other braces (`{ |x| x }`) are
/// not placeholders.
pub(crate) fn first_unknown_placeholder<'a>(arg: &'a str, known: &[&str]) -> Option<&'a str> {
    let mut rest = arg;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let name_len = after
            .char_indices()
            .find(|&(i, c)| !(c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())))
            .map_or(after.len(), |(i, _)| i);
        if name_len > 0 && after[name_len..].starts_with('}') {
            let candidate = &rest[open..open + name_len + 2];
            if !known.contains(&candidate) {
                return Some(candidate);
            }
        }
        rest = after;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(items: &[&str]) -> Vec<String> {
        strings(items)
    }

    // The Ruby prefix of the unit tests: a path that does not exist, so RUBYPATH is its
    // directory as written.
    const RUBY: [&str; 2] = ["/opt/rubies/3.3.0/bin/ruby", "--yjit"];

    fn launch<'a>(
        kind: ServerKind,
        ruby: &'a [String],
        scratch: &'a Path,
        custom: &'a [String],
        processes: u32,
        threads: u32,
    ) -> ServerLaunch<'a> {
        ServerLaunch {
            kind,
            ruby,
            app_dir: Path::new("/srv/app"),
            host: std::net::Ipv4Addr::LOCALHOST.into(),
            port: 8080,
            processes,
            threads,
            scratch_dir: scratch,
            custom_argv: custom,
            environment: "production",
            bundle_exec: false,
            tls: None,
            preload: false,
        }
    }

    fn expected_env() -> Vec<(String, String)> {
        [
            ("RACK_ENV", "production"),
            ("RAILS_ENV", "production"),
            ("APP_ENV", "production"),
            ("RUBYPATH", "/opt/rubies/3.3.0/bin"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// The command, with the scratch directory shown as `<scratch>`.
    fn build(kind: ServerKind, processes: u32, threads: u32) -> anyhow::Result<ServerCommand> {
        let ruby = s(&RUBY);
        let scratch = tempfile::Builder::new().prefix("unit").tempdir().unwrap();
        let mut cmd = server_command(&launch(
            kind,
            &ruby,
            scratch.path(),
            &[],
            processes,
            threads,
        ))?;
        let dir = scratch.path().display().to_string();
        for arg in &mut cmd.argv {
            *arg = arg.replace(&dir, "<scratch>");
        }
        Ok(cmd)
    }

    #[test]
    fn names_round_trip() {
        // The stored JSON spells a kind as the experiment file does.
        for (kind, name) in ServerKind::all().zip(ServerKind::NAMES) {
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{name}\""));
            assert_eq!(
                serde_json::from_str::<ServerKind>(&format!("\"{name}\"")).unwrap(),
                kind
            );
        }
    }

    #[test]
    fn support_matrix() {
        use ServerKind::*;
        let table: Vec<_> = ServerKind::all()
            .map(|k| (k, k.supports_processes(), k.supports_threads()))
            .collect();
        assert_eq!(
            table,
            [
                (Puma, true, true),
                (Unicorn, true, false),
                (Thin, false, true),
                (Webrick, false, false),
                (Custom, true, true)
            ]
        );
    }

    #[test]
    fn puma_single_mode() {
        let cmd = build(ServerKind::Puma, 1, 4).unwrap();
        assert_eq!(
            cmd.argv,
            s(&[
                "/opt/rubies/3.3.0/bin/ruby",
                "--yjit",
                "-S",
                "puma",
                "-C",
                "<scratch>/puma.rb",
                "-b",
                "tcp://127.0.0.1:8080",
                "-e",
                "production",
                "-t",
                "4:4",
                "-q",
                "/srv/app/config.ru",
            ])
        );
        assert_eq!(cmd.env, expected_env());
        assert_eq!(cmd.cwd, PathBuf::from("/srv/app"));
    }

    /// A fleet node's address (a separate load host): every server listens there, IPv6 in
    /// brackets where a host:port is written; a custom argv must say where with `{host}`.
    #[test]
    fn servers_listen_on_the_host_they_are_given() {
        let ruby = s(&RUBY);
        let scratch = tempfile::Builder::new().prefix("host").tempdir().unwrap();
        let on = |kind, host: &str, custom: &[String]| {
            let mut l = launch(kind, &ruby, scratch.path(), custom, 1, 1);
            l.host = host.parse().unwrap();
            server_command(&l).map(|c| c.argv.join(" "))
        };
        let puma = on(ServerKind::Puma, "10.77.0.11", &[]).unwrap();
        assert!(puma.contains(" -b tcp://10.77.0.11:8080 "), "{puma}");
        let puma6 = on(ServerKind::Puma, "fd00::11", &[]).unwrap();
        assert!(puma6.contains(" -b tcp://[fd00::11]:8080 "), "{puma6}");
        let thin = on(ServerKind::Thin, "10.77.0.11", &[]).unwrap();
        assert!(thin.contains(" -a 10.77.0.11 -p 8080 "), "{thin}");
        let webrick = on(ServerKind::Webrick, "10.77.0.11", &[]).unwrap();
        assert!(webrick.contains(" -o 10.77.0.11 -p 8080 "), "{webrick}");
        on(ServerKind::Unicorn, "10.77.0.11", &[]).unwrap();
        let conf = std::fs::read_to_string(scratch.path().join(UNICORN_CONFIG)).unwrap();
        assert!(conf.contains("listen \"10.77.0.11:8080\""), "{conf}");
        let bind = s(&["{ruby}", "-S", "falcon", "--bind", "http://{host}:{port}"]);
        let falcon = on(ServerKind::Custom, "10.77.0.11", &bind).unwrap();
        assert!(
            falcon.ends_with("--bind http://10.77.0.11:8080"),
            "{falcon}"
        );
        let fixed = s(&[
            "{ruby}",
            "-S",
            "falcon",
            "--bind",
            "http://127.0.0.1:{port}",
        ]);
        assert!(on(ServerKind::Custom, "127.0.0.1", &fixed).is_ok());
        let e = on(ServerKind::Custom, "10.77.0.11", &fixed)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not mention {host}"), "{e}");
    }

    #[test]
    fn puma_cluster_mode() {
        let cmd = build(ServerKind::Puma, 3, 5).unwrap();
        assert_eq!(
            cmd.argv,
            s(&[
                "/opt/rubies/3.3.0/bin/ruby",
                "--yjit",
                "-S",
                "puma",
                "-C",
                "<scratch>/puma.rb",
                "-b",
                "tcp://127.0.0.1:8080",
                "-e",
                "production",
                "-t",
                "5:5",
                "-w",
                "3",
                "-q",
                "/srv/app/config.ru",
            ])
        );
    }

    #[test]
    fn preload_is_puma_s_flag_and_unicorn_s_setting() {
        let ruby = s(&RUBY);
        let scratch = tempfile::Builder::new()
            .prefix("preload")
            .tempdir()
            .unwrap();
        let mut l = launch(ServerKind::Puma, &ruby, scratch.path(), &[], 2, 4);
        l.preload = true;
        let argv = server_command(&l).unwrap().argv;
        let w = argv.iter().position(|a| a == "-w").unwrap();
        assert_eq!(argv[w..w + 3], s(&["-w", "2", "--preload"]));
        l.kind = ServerKind::Unicorn;
        l.threads = 1;
        server_command(&l).unwrap();
        let config = std::fs::read_to_string(scratch.path().join(UNICORN_CONFIG)).unwrap();
        assert!(config.ends_with("preload_app true\n"), "{config}");
    }

    #[test]
    fn unicorn_argv_and_config_file() {
        let ruby = s(&RUBY);
        let scratch = tempfile::Builder::new()
            .prefix("unicorn")
            .tempdir()
            .unwrap();
        // A scratch directory that does not exist yet is created.
        let dir = scratch.path().join("trial-7");
        let cmd = server_command(&launch(ServerKind::Unicorn, &ruby, &dir, &[], 4, 1)).unwrap();
        let config = dir.join("unicorn.conf.rb");
        assert_eq!(
            cmd.argv,
            s(&[
                "/opt/rubies/3.3.0/bin/ruby",
                "--yjit",
                "-S",
                "unicorn",
                "-c",
                config.to_str().unwrap(),
                "-E",
                "production",
                "/srv/app/config.ru",
            ])
        );
        assert_eq!(
            std::fs::read_to_string(&config).unwrap(),
            "# Generated by rubyrace for one trial (unicorn -c).\n\
             worker_processes 4\n\
             listen \"127.0.0.1:8080\"\n\
             timeout 60\n\
             preload_app false\n"
        );
        assert_eq!(cmd.env, expected_env());
    }

    #[test]
    fn thin_plain_and_threaded() {
        let base = s(&[
            "/opt/rubies/3.3.0/bin/ruby",
            "--yjit",
            "-S",
            "thin",
            "start",
            "-a",
            "127.0.0.1",
            "-p",
            "8080",
            "-e",
            "production",
            "-R",
            "/srv/app/config.ru",
        ]);
        assert_eq!(build(ServerKind::Thin, 1, 1).unwrap().argv, base);
        let mut threaded = base.clone();
        threaded.extend(s(&["--threaded", "--threadpool-size", "8"]));
        assert_eq!(build(ServerKind::Thin, 1, 8).unwrap().argv, threaded);
    }

    #[test]
    fn webrick_through_rackup() {
        let cmd = build(ServerKind::Webrick, 1, 1).unwrap();
        assert_eq!(
            cmd.argv,
            s(&[
                "/opt/rubies/3.3.0/bin/ruby",
                "--yjit",
                "-S",
                "rackup",
                "-s",
                "webrick",
                "-E",
                "production",
                "-o",
                "127.0.0.1",
                "-p",
                "8080",
                "-q",
                "/srv/app/config.ru",
            ])
        );
        assert_eq!(cmd.env, expected_env());
    }

    #[test]
    fn rubypath_follows_the_ruby() {
        let scratch = tempfile::Builder::new()
            .prefix("rubypath")
            .tempdir()
            .unwrap();
        // A bare name is looked up through PATH: no RUBYPATH.
        let ruby = s(&["ruby"]);
        let cmd =
            server_command(&launch(ServerKind::Puma, &ruby, scratch.path(), &[], 1, 1)).unwrap();
        assert_eq!(cmd.argv[..3], s(&["ruby", "-S", "puma"]));
        assert!(
            cmd.env.iter().all(|(k, _)| k != "RUBYPATH"),
            "{:?}",
            cmd.env
        );
        // A symlink is resolved to the directory of the real executable.
        let real = scratch.path().join("real/bin");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(real.join("ruby"), "").unwrap();
        std::os::unix::fs::symlink(real.join("ruby"), scratch.path().join("ruby-link")).unwrap();
        let ruby = vec![scratch
            .path()
            .join("ruby-link")
            .to_str()
            .unwrap()
            .to_string()];
        let cmd =
            server_command(&launch(ServerKind::Puma, &ruby, scratch.path(), &[], 1, 1)).unwrap();
        let rubypath = cmd.env.iter().find(|(k, _)| k == "RUBYPATH").unwrap();
        assert_eq!(
            Path::new(&rubypath.1),
            std::fs::canonicalize(&real).unwrap()
        );
        // The argv keeps the Ruby as given.
        assert_eq!(cmd.argv[0], ruby[0]);
    }

    #[test]
    fn environment_is_passed_through() {
        let ruby = s(&RUBY);
        let scratch = tempfile::Builder::new().prefix("env").tempdir().unwrap();
        let mut l = launch(ServerKind::Puma, &ruby, scratch.path(), &[], 1, 1);
        l.environment = "staging";
        let cmd = server_command(&l).unwrap();
        assert!(
            cmd.argv.windows(2).any(|w| w == ["-e", "staging"]),
            "{:?}",
            cmd.argv
        );
        assert_eq!(
            cmd.env[..3],
            [
                ("RACK_ENV".to_string(), "staging".to_string()),
                ("RAILS_ENV".to_string(), "staging".to_string()),
                ("APP_ENV".to_string(), "staging".to_string()),
            ]
        );
    }

    fn error(kind: ServerKind, processes: u32, threads: u32) -> String {
        format!("{:#}", build(kind, processes, threads).unwrap_err())
    }

    #[test]
    fn unsupported_counts_are_errors() {
        let e = error(ServerKind::Unicorn, 2, 4);
        assert!(
            e.contains("unicorn does not take a thread count, so threads must be 1 (got 4)"),
            "{e}"
        );
        assert!(e.contains("single-threaded"), "{e}");
        let e = error(ServerKind::Thin, 2, 1);
        assert!(
            e.contains("thin runs a single process, so processes must be 1 (got 2)"),
            "{e}"
        );
        let e = error(ServerKind::Webrick, 1, 2);
        assert!(
            e.contains("webrick does not take a thread count, so threads must be 1 (got 2)"),
            "{e}"
        );
        let e = error(ServerKind::Webrick, 3, 1);
        assert!(e.contains("webrick runs a single process"), "{e}");
        // The supported ones build.
        for kind in [
            ServerKind::Puma,
            ServerKind::Unicorn,
            ServerKind::Thin,
            ServerKind::Webrick,
        ] {
            build(kind, 1, 1).unwrap();
        }
        build(ServerKind::Unicorn, 8, 1).unwrap();
        build(ServerKind::Thin, 1, 8).unwrap();
    }

    #[test]
    fn bad_launches_are_errors() {
        let e = error(ServerKind::Puma, 0, 1);
        assert!(
            e.contains("processes and threads must be at least 1"),
            "{e}"
        );
        let e = error(ServerKind::Thin, 1, 0);
        assert!(
            e.contains("processes and threads must be at least 1"),
            "{e}"
        );

        let ruby = s(&RUBY);
        let scratch = tempfile::Builder::new().prefix("bad").tempdir().unwrap();
        let mut l = launch(ServerKind::Puma, &ruby, scratch.path(), &[], 1, 1);
        l.port = 0;
        let e = format!("{:#}", server_command(&l).unwrap_err());
        assert!(e.contains("port 0"), "{e}");

        let mut l = launch(ServerKind::Puma, &ruby, scratch.path(), &[], 1, 1);
        l.environment = "";
        let e = format!("{:#}", server_command(&l).unwrap_err());
        assert!(e.contains("environment"), "{e}");

        let no_ruby: Vec<String> = Vec::new();
        let e = format!(
            "{:#}",
            server_command(&launch(
                ServerKind::Webrick,
                &no_ruby,
                scratch.path(),
                &[],
                1,
                1
            ))
            .unwrap_err()
        );
        assert!(e.contains("no Ruby given"), "{e}");

        // A scratch "directory" that is a file cannot hold the unicorn config.
        let file = scratch.path().join("not-a-dir");
        std::fs::write(&file, "").unwrap();
        let e = format!(
            "{:#}",
            server_command(&launch(ServerKind::Unicorn, &ruby, &file, &[], 2, 1)).unwrap_err()
        );
        assert!(e.contains("cannot create the scratch directory"), "{e}");
    }

    fn custom(argv: &[&str], processes: u32, threads: u32) -> anyhow::Result<ServerCommand> {
        let ruby = s(&RUBY);
        let user = s(argv);
        let scratch = tempfile::Builder::new().prefix("custom").tempdir().unwrap();
        server_command(&launch(
            ServerKind::Custom,
            &ruby,
            scratch.path(),
            &user,
            processes,
            threads,
        ))
    }

    #[test]
    fn custom_placeholders_expand() {
        let cmd = custom(
            &[
                "{ruby}",
                "-S",
                "falcon",
                "serve",
                "--bind",
                "http://127.0.0.1:{port}",
                "--config",
                "{app}/config.ru",
                "--count",
                "{processes}",
                "--threads={threads}",
            ],
            2,
            3,
        )
        .unwrap();
        assert_eq!(
            cmd.argv,
            s(&[
                "/opt/rubies/3.3.0/bin/ruby",
                "--yjit",
                "-S",
                "falcon",
                "serve",
                "--bind",
                "http://127.0.0.1:8080",
                "--config",
                "/srv/app/config.ru",
                "--count",
                "2",
                "--threads=3",
            ])
        );
        assert_eq!(cmd.env, expected_env());
        assert_eq!(cmd.cwd, PathBuf::from("/srv/app"));

        // No {ruby}: the argv is used as written; other braces are not placeholders.
        let cmd = custom(
            &[
                "/usr/local/bin/iodine",
                "-p",
                "{port}",
                "-e",
                "x.each { |y| p(y) } {}",
            ],
            1,
            1,
        )
        .unwrap();
        assert_eq!(
            cmd.argv,
            s(&[
                "/usr/local/bin/iodine",
                "-p",
                "8080",
                "-e",
                "x.each { |y| p(y) } {}"
            ])
        );
        // A placeholder may appear several times.
        let cmd = custom(&["srv", "{port}:{port}"], 1, 1).unwrap();
        assert_eq!(cmd.argv, s(&["srv", "8080:8080"]));
    }

    #[test]
    fn custom_errors() {
        let msg = |argv: &[&str], p: u32, t: u32| format!("{:#}", custom(argv, p, t).unwrap_err());
        assert!(msg(&[], 1, 1).contains("the server argv is empty"));
        assert!(msg(&["{ruby}", "-S", "falcon"], 1, 1).contains("does not mention {port}"));
        let e = msg(&["{ruby}", "-S", "falcon", "-p", "{port}"], 2, 1);
        assert!(
            e.contains("processes = 2 but the server argv does not mention {processes}"),
            "{e}"
        );
        let e = msg(&["{ruby}", "-S", "falcon", "-p", "{port}"], 1, 2);
        assert!(
            e.contains("threads = 2 but the server argv does not mention {threads}"),
            "{e}"
        );
        let e = msg(&["{ruby}", "-p", "{prot}", "{port}"], 1, 1);
        assert!(
            e.contains("unknown placeholder {prot} in \"{prot}\""),
            "{e}"
        );
        assert!(
            e.contains("{ruby}, {host}, {port}, {app}, {processes}, {threads}"),
            "{e}"
        );
        let e = msg(&["{ruby}", "--bind=http://{hots}:{port}"], 1, 1);
        assert!(e.contains("unknown placeholder {hots}"), "{e}");
        let e = msg(&["env", "R={ruby}", "{port}"], 1, 1);
        assert!(e.contains("{ruby} must be an argument on its own"), "{e}");

        let no_ruby: Vec<String> = Vec::new();
        let user = s(&["{ruby}", "{port}"]);
        let scratch = tempfile::Builder::new()
            .prefix("custom-noruby")
            .tempdir()
            .unwrap();
        let e = format!(
            "{:#}",
            server_command(&launch(
                ServerKind::Custom,
                &no_ruby,
                scratch.path(),
                &user,
                1,
                1
            ))
            .unwrap_err()
        );
        assert!(e.contains("uses {ruby} but no Ruby was given"), "{e}");
    }

    #[test]
    fn unknown_placeholder_scan() {
        assert_eq!(unknown_placeholder("{port}{threads}"), None);
        assert_eq!(unknown_placeholder("a{b}c"), Some("{b}"));
        assert_eq!(unknown_placeholder("{port}{x_1}"), Some("{x_1}"));
        assert_eq!(unknown_placeholder("{1}{ a }{}{{port}}"), None);
        assert_eq!(unknown_placeholder("{"), None);
        assert_eq!(unknown_placeholder("{é}"), None);
    }

    #[test]
    fn with_a_gemfile_the_ruby_flags_also_go_into_rubyopt() {
        let ruby = s(&["/usr/bin/ruby", "--yjit", "-W0"]);
        let scratch = tempfile::Builder::new().prefix("unit").tempdir().unwrap();
        let mut l = launch(ServerKind::Puma, &ruby, scratch.path(), &[], 1, 1);
        assert_eq!(server_command(&l).unwrap().rubyopt, None);
        l.bundle_exec = true;
        let cmd = server_command(&l).unwrap();
        assert_eq!(
            cmd.argv[..6],
            s(&["/usr/bin/ruby", "--yjit", "-W0", "-S", "bundle", "exec"])
        );
        assert_eq!(cmd.rubyopt.as_deref(), Some("--yjit -W0"));
        assert_eq!(prepend_rubyopt("--yjit", Some(" -w ")), "--yjit -w");
        assert_eq!(prepend_rubyopt("--yjit", Some("")), "--yjit");
        // A plain Ruby carries nothing; a flag with a space cannot be carried.
        assert_eq!(carried_rubyopt(&s(&["/usr/bin/ruby"])).unwrap(), None);
        let spaced = s(&["/usr/bin/ruby", "-I/srv/my lib"]);
        let err = carried_rubyopt(&spaced).unwrap_err().to_string();
        assert!(err.contains("\"-I/srv/my lib\" holds a space"), "{err}");
        let app = Path::new("/srv/app");
        let check = server_check_command(ServerKind::Webrick, &ruby, app, "production")
            .unwrap()
            .unwrap();
        assert_eq!(
            check.argv,
            s(&[
                "/usr/bin/ruby",
                "--yjit",
                "-W0",
                "-S",
                "bundle",
                "exec",
                "rackup",
                "--version"
            ])
        );
        assert_eq!(check.rubyopt.as_deref(), Some("--yjit -W0"));
        assert_eq!(check.cwd, app);
        let custom = server_check_command(ServerKind::Custom, &ruby, app, "production");
        assert_eq!(custom.unwrap(), None);
    }
}
