//! Redis as a service of a run: Debian's `redis-server` in the foreground, as an
//! unprivileged user when rubyrace is root (`account`), in its own private directory, with
//! no persistence (`save ""`, `appendonly no`) unless the experiment's settings ask for it,
//! on a loopback port with a password made for the run (`requirepass`, from a private
//! configuration file so no argv shows it), or on a Unix socket only its user may open
//! (mode 700: the redis gem 4.x reads no password from a `unix://` URL); readiness by a
//! real `PING`. rubyrace
//! speaks to it with a few lines of RESP (`Resp`), to check it, record its version and
//! settings, flush it and count its keys.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use experiment::services::{Listen, RedisService};
use results::services::RedisRecord;
use sys::process::{tail_file, Launch, Supervised};

use super::account;

const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Configuration recorded besides what the experiment sets.
const RECORDED: [&str; 5] = [
    "maxmemory",
    "maxmemory-policy",
    "save",
    "appendonly",
    "io-threads",
];

/// What the file asks of Redis that this machine cannot give, found before anything
/// starts: an `executable` that is not there (`redis-serverr` used to fail at run time with
/// "Permission denied" and leave an empty data directory).
pub fn check(config: &RedisService) -> Vec<String> {
    if program(config).is_ok() {
        return Vec::new();
    }
    let executable = executable(config);
    let place = if executable.components().count() > 1 {
        "is not an executable file".to_string()
    } else {
        "is not found on PATH".to_string()
    };
    vec![format!(
        "services.redis.executable: {} {place} (Debian: apt-get install redis-server, which scripts/setup installs)",
        executable.display()
    )]
}

/// The executable as the file names it: `redis-server` unless `executable` is set.
fn executable(config: &RedisService) -> PathBuf {
    config
        .executable
        .clone()
        .unwrap_or_else(|| PathBuf::from("redis-server"))
}

/// The path of the `redis-server` `config` would run.
pub fn program(config: &RedisService) -> Result<PathBuf> {
    rubies::discovery::resolve_executable(&executable(config).to_string_lossy())
}

/// Whether `redis-server --version` says 6.2 or later, which has `set-proc-title` (an
/// older Redis refuses an option it does not know).
fn keeps_its_title_option(executable: &Path) -> bool {
    let Ok(out) = std::process::Command::new(executable)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
    else {
        return false;
    };
    version_has_title_option(&String::from_utf8_lossy(&out.stdout))
}

/// `Redis server v=7.0.15 sha=…`: at least 6.2.
fn version_has_title_option(text: &str) -> bool {
    let Some(v) = text.split_whitespace().find_map(|w| w.strip_prefix("v=")) else {
        return false;
    };
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (6, 2)
}

/// A running Redis.
pub struct Redis {
    process: Option<Supervised>,
    home: PathBuf,
    endpoint: Endpoint,
    /// `requirepass` on a TCP port; never recorded.
    password: Option<String>,
    pub record: RedisRecord,
}

#[derive(Clone)]
enum Endpoint {
    Tcp(u16),
    Unix(PathBuf),
}

impl Redis {
    /// How it ended, when it is no longer running (killed, crashed) though it should be.
    pub fn died(&mut self) -> Option<std::process::ExitStatus> {
        self.process.as_mut().and_then(|p| p.exited())
    }

    /// Starts redis-server with its files under `home` (emptied first); returns once it
    /// answers PING.
    /// A start that fails leaves its log and nothing else (no `data/` or private
    /// directory).
    pub fn start(config: &RedisService, home: &Path, registry: &Path, tag: &str) -> Result<Redis> {
        let started = Self::start_in(config, home, registry, tag);
        if started.is_err() {
            remove_home(home);
        }
        started
    }

    fn start_in(config: &RedisService, home: &Path, registry: &Path, tag: &str) -> Result<Redis> {
        let executable = executable(config);
        remove_home(home);
        std::fs::create_dir_all(home)
            .with_context(|| format!("cannot create {}", home.display()))?;
        let user = account::service_user("Redis", &["redis", "nobody"])?;
        let data = account::private_dir(home, user.as_ref(), "rubyrace-redis-")?.join("data");
        std::fs::create_dir_all(&data)
            .with_context(|| format!("cannot create {}", data.display()))?;
        account::make_private(&data, user.as_ref())?;
        let endpoint = match config.listen {
            Listen::Tcp => Endpoint::Tcp(crate::readiness::free_port()?),
            Listen::Unix => {
                let socket = data.join("redis.sock");
                if socket.as_os_str().len() > 107 {
                    bail!(
                        "services.redis: listen = \"unix\", but the socket path {} is over the 107 bytes of a Unix socket: use listen = \"tcp\", or a shorter results directory",
                        socket.display()
                    );
                }
                Endpoint::Unix(socket)
            }
        };
        // The password, on TCP, from a configuration file in the private directory: an
        // argv is readable by every local user in /proc.
        let password = match endpoint {
            Endpoint::Tcp(_) => Some(account::new_password()?),
            Endpoint::Unix(_) => None,
        };
        let config_file = data.join("rubyrace.conf");
        let config_text = password
            .as_ref()
            .map(|p| format!("requirepass {p}\n"))
            .unwrap_or_default();
        account::write_private_file(&config_file, &config_text, user.as_ref())?;
        let mut argv = vec![
            executable.to_string_lossy().into_owned(),
            config_file.to_string_lossy().into_owned(),
            "--dir".into(),
            data.to_string_lossy().into_owned(),
            "--daemonize".into(),
            "no".into(),
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "no".into(),
            "--logfile".into(),
            String::new(),
        ];
        match &endpoint {
            Endpoint::Tcp(port) => argv.extend([
                "--bind".into(),
                "127.0.0.1".into(),
                "--port".into(),
                port.to_string(),
            ]),
            Endpoint::Unix(path) => argv.extend([
                "--port".into(),
                "0".into(),
                "--unixsocket".into(),
                path.to_string_lossy().into_owned(),
                "--unixsocketperm".into(),
                "700".into(),
            ]),
        }
        if keeps_its_title_option(&executable) && !config.settings.contains_key("set-proc-title") {
            // Redis otherwise writes its title over its argv and environment: /proc would
            // no longer show what it was started with, nor which run started it.
            argv.extend(["--set-proc-title".into(), "no".into()]);
        }
        for (name, value) in &config.settings {
            argv.push(format!("--{name}"));
            argv.push(value.clone());
        }
        let launch = Launch {
            argv: argv.clone(),
            env: Vec::new(),
            cwd: data.clone(),
            cpus: None,
        };
        let started = Instant::now();
        let ids = user.as_ref().map(account::ServiceUser::ids);
        let name = super::log_name("redis", tag);
        let process = Supervised::spawn_as(&launch, home, &name, registry, ids).with_context(|| {
            format!(
                "Redis did not start ({}; Debian: apt-get install redis-server, which scripts/setup installs)",
                executable.display()
            )
        })?;
        let authentication = match &endpoint {
            Endpoint::Tcp(_) => "requirepass",
            Endpoint::Unix(_) => "unix socket, mode 700",
        };
        let (address, url) = match &endpoint {
            Endpoint::Tcp(port) => (
                format!("127.0.0.1:{port}"),
                format!("redis://127.0.0.1:{port}/0"),
            ),
            Endpoint::Unix(path) => (
                path.display().to_string(),
                format!("unix://{}?db=0", path.display()),
            ),
        };
        let mut redis = Redis {
            process: Some(process),
            home: home.to_path_buf(),
            endpoint,
            password,
            record: RedisRecord {
                argv,
                user: account::user_name(user.as_ref()),
                data_dir: data.clone(),
                address,
                url,
                authentication: authentication.into(),
                log: home.join(format!("{name}.stdout")),
                ..RedisRecord::default()
            },
        };
        redis.wait_ready(started)?;
        redis.record.ready_after_s = started.elapsed().as_secs_f64();
        let info = redis.command(&["INFO", "server"])?.text();
        redis.record.version = info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("")
            .trim()
            .to_string();
        let mut names: Vec<String> = RECORDED.iter().map(|s| s.to_string()).collect();
        names.extend(config.settings.keys().cloned());
        for name in names {
            if let Ok(Reply::Array(items)) = redis.command(&["CONFIG", "GET", &name]) {
                if let [k, v] = items.as_slice() {
                    redis.record.settings.insert(k.text(), v.text());
                }
            }
        }
        Ok(redis)
    }

    fn wait_ready(&mut self, started: Instant) -> Result<()> {
        loop {
            if let Some(status) = self.process.as_mut().and_then(|p| p.exited()) {
                bail!(
                    "Redis exited before it was ready ({}); {}",
                    sys::process::describe_status(status),
                    self.log_tail()
                );
            }
            if matches!(self.command(&["PING"]), Ok(Reply::Status(s)) if s == "PONG") {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                bail!(
                    "Redis did not answer PING within {}s; {}",
                    READY_TIMEOUT.as_secs(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The end of its log, and of its stderr when it wrote any: Redis reports a
    /// configuration it refuses there ("FATAL CONFIG FILE ERROR"), before any log.
    fn log_tail(&self) -> String {
        let mut text = format!(
            "the end of its log ({}):\n{}",
            self.record.log.display(),
            tail_file(&self.record.log, 2000).trim_end()
        );
        let stderr = self.record.log.with_extension("stderr");
        let said = tail_file(&stderr, 2000);
        if !said.trim().is_empty() {
            text.push_str(&format!(
                "\nits stderr ({}):\n{}",
                stderr.display(),
                said.trim_end()
            ));
        }
        text
    }

    /// `REDIS_URL` with the password: for the app's environment only.
    pub fn url(&self) -> String {
        match &self.password {
            Some(p) => self
                .record
                .url
                .replacen("redis://", &format!("redis://:{p}@"), 1),
            None => self.record.url.clone(),
        }
    }

    /// Sends one command on a new connection (after `AUTH`, when Redis has a password)
    /// and reads its reply.
    pub fn command(&self, args: &[&str]) -> Result<Reply> {
        let timeout = Some(Duration::from_secs(5));
        let mut commands: Vec<&[&str]> = Vec::new();
        let auth;
        if let Some(p) = &self.password {
            auth = ["AUTH", p.as_str()];
            commands.push(&auth);
        }
        commands.push(args);
        match &self.endpoint {
            Endpoint::Tcp(port) => {
                let s = TcpStream::connect(("127.0.0.1", *port))?;
                s.set_read_timeout(timeout)?;
                exchange(s, &commands)
            }
            Endpoint::Unix(path) => {
                let s = UnixStream::connect(path)?;
                s.set_read_timeout(timeout)?;
                exchange(s, &commands)
            }
        }
    }

    pub fn flush_all(&self) -> Result<()> {
        match self.command(&["FLUSHALL"])? {
            Reply::Status(s) if s == "OK" => Ok(()),
            other => bail!("Redis answered FLUSHALL with {other:?}"),
        }
    }

    pub fn key_count(&self) -> Result<i64> {
        match self.command(&["DBSIZE"])? {
            Reply::Integer(n) => Ok(n),
            other => bail!("Redis answered DBSIZE with {other:?}"),
        }
    }

    /// TERM, KILL after 10 s; then its directory is removed (the log stays).
    pub fn stop(mut self) -> String {
        let ended = self
            .process
            .take()
            .map(|mut p| p.stop(Duration::from_secs(10)));
        remove_home(&self.home);
        ended.map_or_else(String::new, |e| format!("{} ({})", e.status, e.stopped_by))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.stop(Duration::from_secs(5));
            remove_home(&self.home);
        }
    }
}

/// Removes a Redis's files under `home` and the private directory it may link to; the log
/// stays. Also what an earlier Redis of this directory left (rubyrace was killed).
pub fn remove_home(home: &Path) {
    account::remove_outside(home);
    let _ = std::fs::remove_dir_all(home.join("data"));
}

/// A RESP reply.
#[derive(Debug, PartialEq)]
pub enum Reply {
    Status(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Reply {
    /// The reply as text (a bulk string, a status, a number).
    pub fn text(&self) -> String {
        match self {
            Reply::Status(s) | Reply::Error(s) => s.clone(),
            Reply::Integer(n) => n.to_string(),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            Reply::Bulk(None) => String::new(),
            Reply::Array(items) => items.iter().map(Reply::text).collect::<Vec<_>>().join(" "),
        }
    }
}

/// Sends `commands` at once and reads their replies; the last reply, or the first error
/// (an AUTH's is named without its password).
fn exchange<S: Read + Write>(mut stream: S, commands: &[&[&str]]) -> Result<Reply> {
    let request: Vec<u8> = commands.iter().flat_map(|c| encode(c)).collect();
    stream.write_all(&request)?;
    let mut reader = BufReader::new(stream);
    let mut last = Reply::Bulk(None);
    for args in commands {
        last = read_reply(&mut reader)?;
        if let Reply::Error(e) = &last {
            let shown = if args.first() == Some(&"AUTH") {
                "AUTH".to_string()
            } else {
                args.join(" ")
            };
            bail!("Redis: {shown}: {e}");
        }
    }
    Ok(last)
}

/// A command as a RESP array of bulk strings.
fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend(format!("${}\r\n", a.len()).bytes());
        out.extend(a.bytes());
        out.extend(b"\r\n");
    }
    out
}

fn read_reply(r: &mut impl BufRead) -> Result<Reply> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        bail!("Redis closed the connection");
    }
    let line = line.trim_end_matches(['\r', '\n']);
    let (kind, rest) = line.split_at(line.len().min(1));
    Ok(match kind {
        "+" => Reply::Status(rest.to_string()),
        "-" => Reply::Error(rest.to_string()),
        ":" => Reply::Integer(rest.parse().context("a RESP integer")?),
        "$" => {
            let n: i64 = rest.parse().context("a RESP bulk length")?;
            if n < 0 {
                Reply::Bulk(None)
            } else {
                let mut buf = vec![0; n as usize + 2];
                r.read_exact(&mut buf)?;
                buf.truncate(n as usize);
                Reply::Bulk(Some(buf))
            }
        }
        "*" => {
            let n: i64 = rest.parse().context("a RESP array length")?;
            let mut items = Vec::new();
            for _ in 0..n.max(0) {
                items.push(read_reply(r)?);
            }
            Reply::Array(items)
        }
        _ => bail!("not a RESP reply: {line:?}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_title_option_is_given_from_redis_6_2() {
        assert!(version_has_title_option(
            "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64"
        ));
        assert!(version_has_title_option("Redis server v=6.2.0 sha=0"));
        assert!(!version_has_title_option("Redis server v=6.0.16 sha=0"));
        assert!(!version_has_title_option("Redis server v=5.0.7"));
        assert!(!version_has_title_option("no version here"));
    }

    #[test]
    fn resp_replies_are_read_as_redis_writes_them() {
        // Replies as in the RESP2 specification (redis.io/docs/reference/protocol-spec).
        let mut input: &[u8] =
            b"*2\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n:42\r\n$-1\r\n+PONG\r\n-ERR unknown\r\n";
        assert_eq!(
            read_reply(&mut input).unwrap(),
            Reply::Array(vec![
                Reply::Bulk(Some(b"maxmemory".to_vec())),
                Reply::Bulk(Some(b"0".to_vec()))
            ])
        );
        assert_eq!(read_reply(&mut input).unwrap(), Reply::Integer(42));
        assert_eq!(read_reply(&mut input).unwrap(), Reply::Bulk(None));
        assert_eq!(
            read_reply(&mut input).unwrap(),
            Reply::Status("PONG".into())
        );
        assert_eq!(
            read_reply(&mut input).unwrap(),
            Reply::Error("ERR unknown".into())
        );
        assert!(read_reply(&mut input).is_err());
        assert_eq!(encode(&["GET", "k"]), b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    }
}
