//! The server of an HTTP trial: a port, the start (with the probe, on its CPUs), readiness,
//! and the stop, with the processes that escaped its process group and the probe's summary.
//! An interleaved block (`crate::interleave`) uses the same steps for each of its servers.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::directory::{is_storage_error, STDERR_TAIL};
use super::{Stop, TrialSpec};
use crate::certificate::ServerCertificate;
use crate::probe;
use crate::readiness::{free_port_on, wait_ready, Readiness};
use experiment::servers::{server_command, ServerCommand, ServerLaunch};
use results::{ServerRecord, TrialResult, TrialStatus};
use sys::environment;
use sys::process::{describe_orphans, kill_orphans, Launch, Orphan, Supervised};

/// A configuration's server, started and answering: what the phases after the start
/// share, in a trial of its own or in an interleaved block.
pub(crate) struct ServerUnderTest {
    pub server: Supervised,
    pub record: ServerRecord,
    pub addr: SocketAddr,
    pub probe_dir: PathBuf,
    /// The allocators each process had mapped at the start of the measured phase.
    pub maps: BTreeMap<i32, Vec<String>>,
    /// `tls = true`: the authority of the server's certificate, which the load trusts.
    pub tls_ca: Option<PathBuf>,
}

impl ServerUnderTest {
    /// The URL the load goes to, and `load` with the trust of a `tls = true` server.
    pub fn load_target(&self, load: &load::LoadSettings) -> (String, load::LoadSettings) {
        let scheme = if self.tls_ca.is_some() {
            "https"
        } else {
            "http"
        };
        let url = format!(
            "{scheme}://{}{}",
            self.addr,
            load.path.as_deref().unwrap_or("/")
        );
        let mut settings = load.clone();
        if let Some(ca) = &self.tls_ca {
            settings.tls_trust = Some(load::tls::TlsTrust::CaFile(ca.clone()));
        }
        (url, settings)
    }
}

/// Steps 1 to 3 of a trial: a port, the server started (with the probe, on its CPUs), and
/// readiness. `Ok(None)` when it did not come up: the result says why, and the server is
/// stopped and recorded.
pub(crate) fn start_server(
    spec: &TrialSpec,
    interrupt: &Arc<AtomicBool>,
    result: &mut TrialResult,
) -> Result<Option<ServerUnderTest>, Stop> {
    let s = &spec.settings;
    // The loopback, or the address a separate load host reaches (`crate::remote_load`).
    let host = crate::remote_load::server_address();
    let Prepared {
        addr,
        certificate,
        tls_client,
        launch,
        mut record,
        probe_dir,
    } = match prepare(spec, host, result) {
        Ok(prepared) => prepared,
        Err(reason) => {
            result.reason = Some(reason);
            return Ok(None);
        }
    };

    // 3. Start the server.
    let mut server = match Supervised::spawn(
        &launch,
        &spec.out_dir,
        results::store::trial_files::SERVER_LOG,
        &spec.registry,
    ) {
        Ok(server) => server,
        Err(e) if is_storage_error(&e) => {
            return Err(Stop::WriteFailed(format!(
                "cannot write the server's output files in {}: {e}",
                spec.out_dir.display()
            )))
        }
        Err(e) => {
            result.reason = Some(format!("the server did not start: {e}"));
            result.server = Some(record);
            return Ok(None);
        }
    };
    record.pid = Some(server.pid());

    // 4. Readiness.
    let ready = wait_ready(
        addr,
        &s.readiness_path,
        tls_client.as_ref(),
        s.readiness_timeout,
        &mut server,
        interrupt,
    );
    let sut = ServerUnderTest {
        server,
        record,
        addr,
        probe_dir,
        maps: BTreeMap::new(),
        tls_ca: certificate.map(|c| c.ca),
    };
    settle_readiness(ready, sut, spec, result)
}

/// What a server is started with, once its port, certificate, command and environment are
/// settled.
struct Prepared {
    addr: SocketAddr,
    certificate: Option<ServerCertificate>,
    /// The client readiness asks a `tls = true` server with.
    tls_client: Option<load::tls::TlsClient>,
    launch: Launch,
    record: ServerRecord,
    probe_dir: PathBuf,
}

/// Everything before the server's spawn: its port, certificate, command and environment,
/// the environment recorded in `result`. `Err` is the reason the trial gives.
fn prepare(spec: &TrialSpec, host: IpAddr, result: &mut TrialResult) -> Result<Prepared, String> {
    let s = &spec.settings;

    // 1. A port.
    let port = choose_port(host, s.port)?;
    let addr = SocketAddr::from((host, port));

    // 2. The certificate of a `tls = true` server: made once per run, in DIR/tls.
    let (certificate, tls_client) = tls_for(spec)?;

    // The command and environment the server starts with.
    let command = server_command(&ServerLaunch {
        kind: s.server,
        ruby: &s.ruby_argv,
        app_dir: &s.app_dir,
        host,
        port,
        processes: s.processes,
        threads: s.threads,
        scratch_dir: &spec.out_dir,
        custom_argv: &s.server_argv,
        environment: "production",
        bundle_exec: s.gemfile.is_some(),
        tls: certificate
            .as_ref()
            .map(|c| (c.cert.as_path(), c.key.as_path())),
        preload: s.preload,
    })
    .map_err(|e| format!("cannot build the server command: {e:#}"))?;
    let probe_dir = spec.out_dir.join(probe::PROBE_DIR);
    let env = server_env(spec, &command, &probe_dir)?;
    // Record the environment the server really gets: rubyrace's, the server command's
    // (RACK_ENV...), then the configuration's.
    let mut effective: BTreeMap<String, String> = std::env::vars().collect();
    effective.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
    result.environment.env = environment::captured_env(&effective, &spec.record_env);
    let launch = Launch {
        argv: command.argv.clone(),
        env: env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        cwd: command.cwd.clone(),
        cpus: spec.cpus.as_ref().map(|c| c.server.clone()),
    };
    let record = ServerRecord {
        argv: launch.argv.clone(),
        // Recorded without the passwords of URLs (the services' DATABASE_URL, REDIS_URL).
        env: env
            .into_iter()
            .map(|(k, v)| (k, environment::redact_url_passwords(&v)))
            .collect(),
        cwd: launch.cwd.clone(),
        port,
        ..ServerRecord::default()
    };
    Ok(Prepared {
        addr,
        certificate,
        tls_client,
        launch,
        record,
        probe_dir,
    })
}

/// Step 1: a free port on `host` when `port` is 0, else `port`, if nothing listens there.
fn choose_port(host: IpAddr, port: u16) -> Result<u16, String> {
    if port == 0 {
        return free_port_on(host).map_err(|e| format!("cannot find a free port: {e}"));
    }
    // A fixed port that is taken would send the load to someone else's server.
    if let Err(e) = TcpListener::bind((host, port)) {
        return Err(format!(
            "port {port} is already in use on {host} ({e}); another server is listening there"
        ));
    }
    Ok(port)
}

/// Step 2: the certificate of a `tls = true` server and the client that trusts it; neither
/// without TLS.
fn tls_for(
    spec: &TrialSpec,
) -> Result<(Option<ServerCertificate>, Option<load::tls::TlsClient>), String> {
    if !spec.settings.tls {
        return Ok((None, None));
    }
    let results = spec.registry.parent().unwrap_or(&spec.out_dir);
    let certificate = crate::certificate::server_certificate(&results.join("tls"))
        .map_err(|e| format!("tls = true: {e:#}"))?;
    let client = load::tls::TlsClient::new(
        "127.0.0.1",
        &load::tls::TlsTrust::CaFile(certificate.ca.clone()),
    )
    .map_err(|e| format!("tls = true: {e}"))?;
    Ok((Some(certificate), Some(client)))
}

/// The server's environment: its command's, the services', then the configuration's, with
/// the probe (whose directory is created) in RUBYOPT.
fn server_env(
    spec: &TrialSpec,
    command: &ServerCommand,
    probe_dir: &Path,
) -> Result<BTreeMap<String, String>, String> {
    let s = &spec.settings;
    let mut env: BTreeMap<String, String> = command.env.iter().cloned().collect();
    env.extend(spec.service_env.clone());
    env.extend(s.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    // With a Gemfile, the Ruby's flags also go through RUBYOPT, for a Ruby that `bundle
    // exec` starts anew; the probe then goes in front of them.
    if let Some(flags) = &command.rubyopt {
        let existing = env
            .get("RUBYOPT")
            .cloned()
            .or_else(|| std::env::var("RUBYOPT").ok());
        env.insert(
            "RUBYOPT".to_string(),
            experiment::servers::prepend_rubyopt(flags, existing.as_deref()),
        );
    }
    probe::add_to_env(&mut env, probe_dir, s.compact)?;
    Ok(env)
}

/// The end of step 4: a ready server with its time to readiness; one that failed or was
/// interrupted is stopped and recorded (failed: with the app's error in the reason).
fn settle_readiness(
    ready: Readiness,
    sut: ServerUnderTest,
    spec: &TrialSpec,
    result: &mut TrialResult,
) -> Result<Option<ServerUnderTest>, Stop> {
    match ready {
        Readiness::Ready { after } => {
            let mut sut = sut;
            sut.record.ready_after_s = Some(after.as_secs_f64());
            Ok(Some(sut))
        }
        Readiness::Failed(reason) => {
            // What the app said went wrong, not only that it went wrong.
            result.reason = Some(
                match sys::process::ruby_error_line(sut.server.stderr_path()) {
                    Some(line) => format!("{reason}: {line}"),
                    None => reason,
                },
            );
            stop_server(sut, spec, result);
            Ok(None)
        }
        Readiness::Interrupted => {
            stop_server(sut, spec, result);
            Err(Stop::Interrupted)
        }
    }
}

/// Step 6: stop the server, kill whatever escaped its process group, record how it ended;
/// then the probe's summary and the verification of the settings, for a measured trial.
pub(super) fn stop_server(sut: ServerUnderTest, spec: &TrialSpec, result: &mut TrialResult) {
    let stopped = stop_process(sut, spec);
    let orphans = kill_orphans(&[stopped.pid]);
    record_stopped(stopped, orphans, Orphans::Its, None, result);
}

/// A server whose processes are stopped, not recorded yet.
pub(crate) struct StoppedServer {
    pub pid: i32,
    record: ServerRecord,
    probe_dir: PathBuf,
    maps: BTreeMap<i32, Vec<String>>,
}

/// Whose the orphans handed to [`record_stopped`] are.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Orphans {
    /// This server's: it was the only one up.
    Its,
    /// Left by one of the servers of an interleaved block, which cannot be told apart.
    OneOfTheBlock,
}

/// Stops the server's process group and records how it ended.
pub(crate) fn stop_process(sut: ServerUnderTest, spec: &TrialSpec) -> StoppedServer {
    let ServerUnderTest {
        mut server,
        mut record,
        probe_dir,
        maps,
        ..
    } = sut;
    let ended = server.stop(spec.settings.stop_timeout);
    record.stderr_tail = server.stderr_tail(STDERR_TAIL);
    record.ended = Some(ended);
    StoppedServer {
        pid: server.pid(),
        record,
        probe_dir,
        maps,
    }
}

/// Records a stopped server in its trial's result, with the orphans found once it (and any
/// other server up with it) had stopped; then the probe's summary and the verification of
/// the settings, for a measured trial. The probe's figures per request divide by
/// `answered`, the requests the server answered between its two snapshots, when the
/// trial's recorded requests are not all of them (an interleaved trial's lead-ins are
/// answered inside its measured phase).
pub(crate) fn record_stopped(
    stopped: StoppedServer,
    orphans: Vec<Orphan>,
    whose: Orphans,
    answered: Option<u64>,
    result: &mut TrialResult,
) {
    let StoppedServer {
        mut record,
        probe_dir,
        maps,
        ..
    } = stopped;
    record.orphans = orphans.clone();
    result.server = Some(record);
    if result.load.is_some() {
        let requests = answered.or(result.load.as_ref().map(|l| l.requests));
        let summary = probe::summarize(&probe::read_records(&probe_dir), &maps, requests);
        probe::apply(result, summary);
    }
    if !orphans.is_empty() {
        note_orphans(result, &orphans, whose);
    }
}

/// A server that left processes outside its process group: they were not measured with
/// it and would outlive it, so a valid trial becomes invalid, and the reason says what
/// happened.
fn note_orphans(result: &mut TrialResult, orphans: &[Orphan], whose: Orphans) {
    let what = match whose {
        Orphans::Its => format!(
            "{} (a server must stay in the foreground and in its process group: does it daemonize?)",
            describe_orphans(orphans)
        ),
        Orphans::OneOfTheBlock => format!(
            "one of the servers of this interleaved block (which one cannot be told): {} (a server must stay in the foreground and in its process group: does one daemonize?)",
            describe_orphans(orphans)
        ),
    };
    if result.status == TrialStatus::Valid {
        result.status = TrialStatus::Invalid;
    }
    result.reason = Some(match result.reason.take() {
        Some(r) => format!("{r}; {what}"),
        None => what,
    });
}
