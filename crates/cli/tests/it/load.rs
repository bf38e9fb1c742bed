//! End-to-end tests of `rubyrace load`: the real binary against real loopback servers
//! (see `support`), asserting on the counts of its JSON report (schema rubyrace.load/1),
//! on what the servers saw, and on the raw and HDR outputs.
//!
//! Every binary run has a hard deadline (crate::support::HARD_DEADLINE); every server and
//! child process is cleaned up by a Drop guard, also when a test fails.
//!
//! The `regression_*` tests at the end are named after engine bugs they caught.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::*;

/// Exit status of a run in which no response came back (docs/load.md, "Exit status").
const EXIT_NO_RESPONSE: i32 = 4;

/// Exit status of invalid usage (docs/load.md, "Exit status").
const EXIT_USAGE: i32 = 2;

/// Like `load`, for a run that gets no response at all: expects exit status 4 (the JSON
/// is still written) and returns the report.
fn load_without_response<S: AsRef<str>>(url: &str, args: &[S]) -> (Run, Report) {
    let run = load_run(url, args);
    assert_eq!(run.code(), Some(EXIT_NO_RESPONSE), "{run:?}");
    let report = run.report();
    assert_eq!(report.requests(), 0, "{report}");
    (run, report)
}

fn ok_response(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn status_response(code: u16, reason: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The bytes of a plain GET as rubyrace serializes it (no extra headers, no body).
fn get_request_len(server: &Server, path: &str) -> u64 {
    format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", server.addr()).len() as u64
}

// -----------------------------------------------------------------------------------------
// 1. A well-behaved keepalive server
// -----------------------------------------------------------------------------------------

#[test]
fn dash_n_gives_exactly_n_responses_on_kept_alive_connections() {
    let server = Server::hello();
    let (_run, r) = load(&server.url("/"), &["-n", "500", "-c", "4"]);
    r.assert_attempts(500);
    assert_eq!(r.requests(), 500, "{r}");
    assert_eq!(r.status(200), 500, "{r}");
    assert_eq!(r.err("total"), 0, "{r}");
    assert_eq!(r.u("/latency_us/count"), 500, "{r}");
    assert_eq!(r.u("/actual/connections_opened"), 4, "{r}");
    assert_eq!(r.u("/actual/reconnects"), 0, "{r}");
    assert_eq!(r.u("/bytes_read"), 500 * HELLO.len() as u64, "{r}");
    assert_eq!(
        r.u("/bytes_written"),
        500 * get_request_len(&server, "/"),
        "{r}"
    );
    assert_eq!(r.value("/settings/mode"), "keepalive");
    assert!(r.warnings().is_empty(), "{r}");

    assert_eq!(server.request_count(), 500);
    assert_eq!(
        server.accepted(),
        4,
        "keepalive connections are reused, never replaced"
    );
    let per_conn = server.requests_per_connection();
    assert_eq!(
        per_conn.values().copied().collect::<Vec<_>>(),
        vec![125; 4],
        "-n is split evenly"
    );
    for req in server.requests() {
        assert_eq!((req.method.as_str(), req.path.as_str()), ("GET", "/"));
        assert_eq!(req.header("host"), Some(server.addr().to_string().as_str()));
        assert!(!req.wants_close());
    }
}

#[test]
fn fourteen_connections_on_three_threads_are_all_used() {
    let server = Server::hello();
    let (_run, r) = load(&server.url("/"), &["-t", "3", "-c", "14", "-n", "280"]);
    r.assert_attempts(280);
    assert_eq!(r.status(200), 280, "{r}");
    assert_eq!(r.u("/actual/threads"), 3, "{r}");
    assert_eq!(r.connections_per_thread(), vec![5, 5, 4], "{r}");
    assert_eq!(r.u("/actual/connections"), 14, "{r}");
    assert_eq!(r.u("/actual/connections_opened"), 14, "{r}");
    assert_eq!(server.accepted(), 14);
    let per_conn = server.requests_per_connection();
    assert_eq!(
        per_conn.len(),
        14,
        "every connection sent requests: {per_conn:?}"
    );
    assert!(
        per_conn.values().all(|&n| n == 20),
        "280 attempts split evenly over 14: {per_conn:?}"
    );
}

#[test]
fn dash_n_smaller_than_connections_sends_exactly_n() {
    let server = Server::hello();
    let (_run, r) = load(&server.url("/"), &["-n", "3", "-c", "8"]);
    r.assert_attempts(3);
    assert_eq!(r.status(200), 3, "{r}");
    assert_eq!(server.request_count(), 3);
    assert_eq!(r.u("/actual/connections"), 8, "{r}");
    assert_eq!(
        r.u("/actual/connections_opened"),
        server.accepted() as u64,
        "the report counts what the server saw:\n{r}"
    );
}

#[test]
fn slow_server_leaves_requests_in_flight_at_the_end_of_a_duration() {
    // 400 ms per response: in 600 ms each connection gets one answer and has one more
    // request in flight when the recorded phase ends.
    let server = ServerBuilder::new(|_| {
        std::thread::sleep(Duration::from_millis(400));
        Reply::Send(HELLO.to_vec())
    })
    .start();
    let (_run, r) = load(
        &server.url("/"),
        &["-d", "600ms", "-c", "2", "--timeout", "5s"],
    );
    r.assert_consistent();
    assert_eq!(r.err("total"), 0, "{r}");
    assert_eq!(r.requests(), 2, "{r}");
    assert_eq!(r.u("/in_flight_at_end"), 2, "{r}");
    assert_eq!(
        r.u("/latency_us/count"),
        2,
        "requests in flight have no latency yet:\n{r}"
    );
    assert!(r.f("/latency_us/min") >= 399_000.0, "{r}");
    assert_eq!(
        server.request_count() as u64,
        r.requests() + r.u("/in_flight_at_end")
    );
}

#[test]
fn more_threads_than_connections_run_one_thread_per_connection() {
    let server = Server::hello();
    let (_run, r) = load(&server.url("/"), &["-t", "4", "-c", "2", "-n", "20"]);
    r.assert_attempts(20);
    assert_eq!(r.u("/settings/threads"), 4);
    assert_eq!(r.u("/actual/threads"), 2, "{r}");
    assert_eq!(r.connections_per_thread(), vec![1, 1], "{r}");
    assert!(r.has_warning("only 2 threads ran"), "{r}");
    assert_eq!(server.accepted(), 2);
}

#[test]
fn pipelining_keeps_requests_in_flight() {
    // This server answers only once 4 complete requests wait on the connection.
    let server = ServerBuilder::new(|_| Reply::Send(HELLO.to_vec()))
        .batch(4)
        .start();

    // Control: without pipelining the server never answers, so the test below can fail.
    let (_run, r) = load_without_response(
        &server.url("/"),
        &["-n", "2", "-c", "1", "--timeout", "300ms"],
    );
    assert_eq!(r.requests(), 0, "{r}");
    assert_eq!(r.err("timeout"), 2, "{r}");

    let before = server.request_count();
    let (_run, r) = load(
        &server.url("/"),
        &["--pipeline", "4", "-n", "400", "-c", "2", "--timeout", "5s"],
    );
    r.assert_attempts(400);
    assert_eq!(r.status(200), 400, "{r}");
    assert_eq!(r.err("total"), 0, "{r}");
    assert_eq!(r.u("/settings/pipeline"), 4);
    assert_eq!(r.u("/actual/connections_opened"), 2, "{r}");
    assert_eq!(r.u("/bytes_read"), 400 * HELLO.len() as u64, "{r}");
    assert_eq!(server.request_count() - before, 400);
}

#[test]
fn pipeline_is_refused_with_other_modes_and_bad_outputs_fail_before_any_load() {
    let server = Server::hello();
    let url = server.url("/");
    let run = rubyrace(&["load", &url, "--pipeline", "2", "--close-header", "-n", "5"]);
    assert_eq!(run.code(), Some(EXIT_USAGE), "{run:?}");
    assert!(run.stderr.contains("--pipeline"), "{run:?}");

    let run = rubyrace(&["load", &url, "-n", "5", "--raw", "/nonexistent-dir/raw.tsv"]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    assert!(run.stderr.contains("--raw"), "{run:?}");
    assert_eq!(
        server.accepted(),
        0,
        "no load is sent when the input is bad"
    );
}

#[test]
fn close_header_against_a_server_that_honours_it() {
    let server = Server::hello(); // answers `Connection: close` and closes
    let (run, r) = load(
        &server.url("/"),
        &["-n", "100", "-c", "2", "--close-header"],
    );
    r.assert_attempts(100);
    assert_eq!(r.status(200), 100, "{r}");
    assert_eq!(r.err("total"), 0, "{r}");
    assert_eq!(r.u("/close_ignored"), 0, "{r}");
    assert!(!r.has_warning("Connection: close"), "{r}");
    assert_eq!(r.value("/settings/mode"), "close-header");
    assert_eq!(
        r.u("/actual/connections_opened"),
        100,
        "one connection per request:\n{r}"
    );
    assert!(run.stderr.contains("close ignored 0"), "{run:?}");

    let requests = server.requests();
    assert_eq!(requests.len(), 100);
    assert!(
        requests.iter().all(|r| r.wants_close()),
        "every request says Connection: close"
    );
    let per_conn = server.requests_per_connection();
    assert_eq!(per_conn.len(), 100, "100 connections served a request");
    assert!(per_conn.values().all(|&n| n == 1), "{per_conn:?}");
    assert_eq!(
        server.accepted(),
        100,
        "no spare connection once -n is spent"
    );
}

#[test]
fn client_close_uses_one_connection_per_request() {
    let server = Server::hello();
    let (_run, r) = load(
        &server.url("/"),
        &["-n", "100", "-c", "2", "--client-close"],
    );
    r.assert_attempts(100);
    assert_eq!(r.status(200), 100, "{r}");
    assert_eq!(r.err("total"), 0, "{r}");
    assert_eq!(r.value("/settings/mode"), "client-close");
    assert_eq!(
        r.u("/actual/connections_opened"),
        100,
        "one connection per request:\n{r}"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 100);
    assert!(
        requests.iter().all(|r| !r.wants_close()),
        "client-close sends plain keepalive requests"
    );
    let per_conn = server.requests_per_connection();
    assert_eq!(per_conn.len(), 100, "100 connections served a request");
    assert!(per_conn.values().all(|&n| n == 1), "{per_conn:?}");
    assert_eq!(
        server.accepted(),
        100,
        "no spare connection once -n is spent"
    );
}

#[test]
fn url_mix_follows_weights_and_its_seed() {
    let server = Server::hello();
    let dir = TempDir::new("mix");
    let mix = dir.write("mix.txt", "# weights 3:1\n3 /a\n\n1 GET /b\n");
    let mix = path_str(&mix);

    let (_run, r) = load(
        &server.url("/ignored"),
        &["--urls", &mix, "-n", "2000", "-c", "4", "--seed", "7"],
    );
    r.assert_attempts(2000);
    assert_eq!(r.status(200), 2000, "{r}");
    let urls = r.value("/settings/urls").as_array().unwrap().clone();
    assert_eq!(urls.len(), 2, "{r}");
    assert_eq!(urls[0]["weight"], 3);
    assert_eq!(urls[0]["path"], "/a");
    assert_eq!(urls[1]["method"], "GET");
    let (a, b) = (server.count_path("/a"), server.count_path("/b"));
    assert_eq!(a + b, 2000, "only the mix's paths are requested");
    let share = a as f64 / 2000.0;
    assert!(
        (0.70..=0.80).contains(&share),
        "share of /a is {share}, weights say 0.75"
    );

    // One connection: its sequence is the whole sequence, reproducible from the seed.
    let sequence = |seed: &str| {
        let server = Server::hello();
        let (_run, r) = load(
            &server.url("/"),
            &["--urls", &mix, "-n", "200", "-c", "1", "--seed", seed],
        );
        r.assert_attempts(200);
        assert_eq!(r.u("/settings/seed"), seed.parse::<u64>().unwrap());
        server
            .requests()
            .into_iter()
            .map(|r| r.path)
            .collect::<Vec<_>>()
    };
    let first = sequence("42");
    assert_eq!(first.len(), 200);
    assert!(
        first.iter().any(|p| p == "/a") && first.iter().any(|p| p == "/b"),
        "{first:?}"
    );
    assert_eq!(
        sequence("42"),
        first,
        "the same seed gives the same sequence"
    );
    assert_ne!(sequence("43"), first, "another seed gives another sequence");
}

#[test]
fn method_body_and_headers_reach_the_server() {
    let server = Server::hello();
    let (_run, r) = load(
        &server.url("/submit?x=1"),
        &[
            "-m", "POST", "--body", "abc", "-H", "X-A: b", "-n", "3", "-c", "1",
        ],
    );
    r.assert_attempts(3);
    assert_eq!(r.status(200), 3, "{r}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for req in &requests {
        assert_eq!(req.method, "POST");
        assert_eq!(req.path, "/submit?x=1");
        assert_eq!(req.body, b"abc");
        assert_eq!(req.header("x-a"), Some("b"));
        assert_eq!(req.header("content-length"), Some("3"));
        assert_eq!(req.header("host"), Some(server.addr().to_string().as_str()));
    }

    // A Host header replaces the default one rather than adding a second.
    let server = Server::hello();
    let (_run, r) = load(
        &server.url("/"),
        &["-H", "Host: custom.example", "-n", "2", "-c", "1"],
    );
    r.assert_attempts(2);
    for req in server.requests() {
        let hosts: Vec<_> = req
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
            .collect();
        assert_eq!(hosts.len(), 1, "{:?}", req.headers);
        assert_eq!(hosts[0].1, "custom.example");
    }
}

#[test]
fn large_body_file_arrives_whole() {
    let server = Server::hello();
    let dir = TempDir::new("body");
    let body: Vec<u8> = (0..2 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let file = dir.write("body.bin", &body);
    let (_run, r) = load(
        &server.url("/upload"),
        &[
            "-m",
            "PUT",
            "--body-file",
            &path_str(&file),
            "-n",
            "4",
            "-c",
            "2",
            "--timeout",
            "10s",
        ],
    );
    r.assert_attempts(4);
    assert_eq!(r.status(200), 4, "{r}");
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for req in &requests {
        assert_eq!(req.method, "PUT");
        assert_eq!(
            req.header("content-length"),
            Some(body.len().to_string().as_str())
        );
        assert!(req.body == body, "the body arrived damaged");
    }
    let head = format!(
        "PUT /upload HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n\r\n",
        server.addr(),
        body.len()
    );
    assert_eq!(
        r.u("/bytes_written"),
        4 * (head.len() + body.len()) as u64,
        "{r}"
    );
}

#[test]
fn open_loop_reaches_its_rate() {
    let server = Server::hello();
    let (_run, r) = load(&server.url("/"), &["--rate", "200", "-d", "2s", "-c", "4"]);
    r.assert_consistent();
    assert_eq!(r.err("total"), 0, "{r}");
    let elapsed = r.f("/elapsed_s");
    assert!(
        (elapsed - 2.0).abs() < 0.05,
        "the recorded phase is -d long: {elapsed}"
    );
    let achieved = r.f("/rate/achieved");
    assert!(
        (180.0..=220.0).contains(&achieved),
        "achieved {achieved} req/s of 200:\n{r}"
    );
    assert!((360..=440).contains(&r.requests()), "{r}");
    assert_eq!(r.f("/rate/target"), 200.0);
    assert!(r.b("/rate/reached"), "rate not reached:\n{r}");
    assert_eq!(r.u("/rate/unsent_at_end"), 0, "{r}");
    assert!(
        !r.value("/latency_uncorrected_us").is_null(),
        "open loop reports uncorrected latency"
    );
    assert_eq!(r.u("/latency_uncorrected_us/count"), r.requests(), "{r}");
    // The server saw the recorded requests (and at most a few more in flight at the end).
    let seen = server.request_count() as u64;
    assert!(
        seen >= r.requests() && seen <= r.requests() + r.u("/in_flight_at_end") + 4,
        "server saw {seen}:\n{r}"
    );
    // Closed loop would have sent thousands: the schedule, not the server, set the pace.
    assert!(seen < 500, "server saw {seen} requests in 2 s at 200 req/s");
}

#[test]
fn open_loop_with_dash_n_keeps_the_schedule() {
    let server = Server::hello();
    let (run, r) = load(&server.url("/"), &["--rate", "100", "-n", "50", "-c", "2"]);
    r.assert_attempts(50);
    assert_eq!(r.status(200), 50, "{r}");
    let elapsed = r.f("/elapsed_s");
    assert!(
        (0.45..0.7).contains(&elapsed),
        "50 sends at 100/s take about 0.5 s, not {elapsed}"
    );
    assert!(
        run.elapsed >= Duration::from_millis(450),
        "{:?}",
        run.elapsed
    );
    assert!(r.b("/rate/reached"), "{r}");
}

#[test]
fn open_loop_against_a_slow_server_counts_the_queueing() {
    // 50 ms per response on one connection: at most 20 req/s against a target of 100.
    let server = ServerBuilder::new(|_| {
        std::thread::sleep(Duration::from_millis(50));
        Reply::Send(HELLO.to_vec())
    })
    .start();
    let (_run, r) = load(
        &server.url("/"),
        &["--rate", "100", "-d", "1s", "-c", "1", "--timeout", "5s"],
    );
    r.assert_consistent();
    assert_eq!(r.err("total"), 0, "{r}");
    assert!(!r.b("/rate/reached"), "{r}");
    assert!(r.has_warning("target rate not reached"), "{r}");
    assert!(r.f("/rate/achieved") < 30.0, "{r}");
    assert!(r.u("/rate/unsent_at_end") > 0, "{r}");
    assert!(r.u("/rate/late_sends") > 0, "{r}");
    // Corrected latency includes the wait for the schedule; uncorrected does not.
    let corrected = r.f("/latency_us/max");
    let uncorrected = r.f("/latency_uncorrected_us/max");
    assert!(corrected >= 300_000.0, "corrected max {corrected} µs:\n{r}");
    assert!(
        uncorrected < 200_000.0,
        "uncorrected max {uncorrected} µs:\n{r}"
    );
    assert!(
        r.f("/latency_us/p50") > 2.0 * r.f("/latency_uncorrected_us/p50"),
        "{r}"
    );
}

#[test]
fn warmup_is_sent_but_not_recorded() {
    let server = Server::hello();
    let started = Instant::now();
    let (_run, r) = load(
        &server.url("/"),
        &["--warmup", "300ms", "-n", "100", "-c", "2"],
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    r.assert_attempts(100);
    assert_eq!(r.status(200), 100, "{r}");
    assert_eq!(r.f("/settings/warmup_s"), 0.3);
    let seen = server.request_count() as u64;
    assert!(
        seen > r.requests() + 10,
        "the server saw {seen} requests, the report {}",
        r.requests()
    );

    let server = Server::hello();
    let (_run, r) = load(
        &server.url("/"),
        &["--warmup", "300ms", "-d", "500ms", "-c", "2"],
    );
    r.assert_consistent();
    let elapsed = r.f("/elapsed_s");
    assert!(
        (elapsed - 0.5).abs() < 0.05,
        "the warmup is not part of elapsed_s: {elapsed}"
    );
    let seen = server.request_count() as u64;
    assert!(
        seen > r.requests() + r.u("/in_flight_at_end") + 10,
        "the server saw {seen} requests, the report {}:\n{r}",
        r.requests()
    );
}

// -----------------------------------------------------------------------------------------
// 2. A server that ignores `Connection: close`
// -----------------------------------------------------------------------------------------

#[test]
fn server_ignoring_connection_close_is_counted_and_warned_about() {
    let server = ServerBuilder::new(|_| Reply::Send(HELLO.to_vec()))
        .ignore_close()
        .start();
    let (run, r) = load(
        &server.url("/"),
        &[
            "--close-header",
            "--close-grace",
            "50ms",
            "-n",
            "20",
            "-c",
            "2",
        ],
    );
    r.assert_attempts(20);
    assert_eq!(r.status(200), 20, "{r}");
    assert_eq!(
        r.err("total"),
        0,
        "ignoring the header is not an error:\n{r}"
    );
    // Every response but possibly the last of each connection waited out the grace.
    let ignored = r.u("/close_ignored");
    assert!(
        (18..=20).contains(&ignored),
        "close_ignored {ignored}:\n{r}"
    );
    assert!(r.has_warning("ignored `Connection: close`"), "{r}");
    assert!(
        run.stderr
            .contains("warning: the server ignored `Connection: close`"),
        "{run:?}"
    );
    // rubyrace closed those connections itself: still one connection per request.
    let per_conn = server.requests_per_connection();
    assert!(per_conn.values().all(|&n| n == 1), "{per_conn:?}");
    assert!(server.requests().iter().all(|r| r.wants_close()));
}

// -----------------------------------------------------------------------------------------
// 3. A server that never answers
// -----------------------------------------------------------------------------------------

#[test]
fn hanging_server_times_out_for_a_duration() {
    let server = ServerBuilder::new(|_| Reply::Hang).start();
    let (run, r) = load_without_response(
        &server.url("/"),
        &["--timeout", "200ms", "-d", "1s", "-c", "2"],
    );
    assert!(
        run.elapsed < Duration::from_secs(8),
        "took {:?}",
        run.elapsed
    );
    r.assert_consistent();
    assert_eq!(r.requests(), 0, "{r}");
    let timeouts = r.err("timeout");
    // Two connections, each timing out every ~200 ms for 1 s.
    assert!((6..=10).contains(&timeouts), "timeouts {timeouts}:\n{r}");
    assert_eq!(r.err("total"), timeouts, "{r}");
    assert!(r.u("/in_flight_at_end") <= 2, "{r}");
    // Timeouts are recorded in the histogram with their wait so far, at least --timeout.
    assert_eq!(r.u("/latency_us/count"), timeouts, "{r}");
    assert!(r.f("/latency_us/min") >= 199_000.0, "{r}");
    assert!(r.has_warning("no response"), "{r}");
    // Each timeout replaced its connection.
    assert!(
        server.accepted() as u64 >= timeouts,
        "accepted {}:\n{r}",
        server.accepted()
    );
}

#[test]
fn hanging_server_times_out_for_a_count() {
    let server = ServerBuilder::new(|_| Reply::Hang).start();
    let (run, r) = load_without_response(
        &server.url("/"),
        &["--timeout", "200ms", "-n", "4", "-c", "2"],
    );
    assert!(
        run.elapsed < Duration::from_secs(8),
        "took {:?}",
        run.elapsed
    );
    r.assert_attempts(4);
    assert_eq!(r.requests(), 0, "{r}");
    assert_eq!(r.err("timeout"), 4, "{r}");

    // Requests pipelined behind the oldest are aborted and counted with it.
    let before = server.request_count();
    let (run, r) = load_without_response(
        &server.url("/"),
        &[
            "--timeout",
            "200ms",
            "-n",
            "8",
            "-c",
            "1",
            "--pipeline",
            "4",
        ],
    );
    assert!(
        run.elapsed < Duration::from_secs(8),
        "took {:?}",
        run.elapsed
    );
    r.assert_attempts(8);
    assert_eq!(r.err("timeout"), 8, "{r}");
    assert_eq!(r.u("/latency_us/count"), 8, "{r}");
    assert_eq!(server.request_count() - before, 8);
}

// -----------------------------------------------------------------------------------------
// 4./5. Servers that reset or close mid-response
// -----------------------------------------------------------------------------------------

#[test]
fn resetting_server_gives_read_errors() {
    let server = ServerBuilder::new(|_| Reply::Reset).start();
    let (_run, r) = load_without_response(
        &server.url("/"),
        &["-n", "50", "-c", "2", "--timeout", "5s"],
    );
    r.assert_attempts(50);
    assert_eq!(r.requests(), 0, "{r}");
    assert!(r.err("read") > 0, "{r}");
    assert_eq!(
        r.err("read") + r.err("write"),
        50,
        "every attempt lost to the reset:\n{r}"
    );
    assert_eq!(
        r.err("timeout") + r.err("parse") + r.err("connect"),
        0,
        "{r}"
    );
    assert_eq!(server.request_count(), 50);
}

#[test]
fn server_closing_mid_response_gives_read_errors() {
    let server = ServerBuilder::new(|_| {
        Reply::SendThenClose(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789".to_vec())
    })
    .start();
    let (_run, r) = load_without_response(
        &server.url("/"),
        &["-n", "20", "-c", "2", "--timeout", "5s"],
    );
    r.assert_attempts(20);
    assert_eq!(
        r.requests(),
        0,
        "a cut-short response is not a response:\n{r}"
    );
    assert_eq!(r.err("read"), 20, "{r}");
    assert_eq!(r.err("timeout"), 0, "{r}");
}

#[test]
fn server_closing_keepalive_connections_cleanly_is_not_an_error() {
    // Announced: `Connection: close` on every response (the server then waits for the
    // client to close).
    let server = ServerBuilder::new(|_| {
        Reply::Send(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok".to_vec())
    })
    .start();
    let (_run, r) = load(
        &server.url("/"),
        &["-n", "40", "-c", "1", "--timeout", "5s"],
    );
    r.assert_attempts(40);
    assert_eq!(r.status(200), 40, "{r}");
    assert_eq!(r.err("total"), 0, "{r}");
    assert_eq!(r.u("/actual/server_closed"), 40, "{r}");
    assert!(r.has_warning("the server closed"), "{r}");
    let per_conn = server.requests_per_connection();
    assert!(
        per_conn.len() == 40 && per_conn.values().all(|&n| n == 1),
        "{per_conn:?}"
    );

    // Silent: the server closes the connection 5 ms after the response, while it is idle
    // (the open loop sends every 100 ms).
    let server = ServerBuilder::new(|_| {
        Reply::SendThenCloseAfter(ok_response("ok"), Duration::from_millis(5))
    })
    .start();
    let (_run, r) = load(
        &server.url("/"),
        &["--rate", "10", "-d", "1s", "-c", "1", "--timeout", "5s"],
    );
    r.assert_consistent();
    assert_eq!(r.err("total"), 0, "{r}");
    assert!(r.requests() >= 9, "{r}");
    let closed = r.u("/actual/server_closed");
    assert!(
        closed + 1 >= r.requests() && closed <= r.requests(),
        "server_closed {closed}:\n{r}"
    );
}

// -----------------------------------------------------------------------------------------
// 6. Malformed responses
// -----------------------------------------------------------------------------------------

/// Runs `-n 10 -c 1` against a server answering `response` and expects 10 parse errors.
fn expect_parse_errors(response: Vec<u8>) {
    let server = ServerBuilder::new(move |_| Reply::Send(response.clone())).start();
    let (run, r) = load_without_response(
        &server.url("/"),
        &["-n", "10", "-c", "1", "--timeout", "5s"],
    );
    assert!(
        run.elapsed < Duration::from_secs(10),
        "no hang: took {:?}",
        run.elapsed
    );
    r.assert_attempts(10);
    assert_eq!(r.requests(), 0, "{r}");
    assert_eq!(r.err("parse"), 10, "{r}");
    assert_eq!(r.err("timeout"), 0, "{r}");
    assert_eq!(server.request_count(), 10);
}

#[test]
fn garbage_is_a_parse_error() {
    expect_parse_errors(b"this is not http\r\n\r\n".to_vec());
}

#[test]
fn bad_content_length_is_a_parse_error() {
    expect_parse_errors(b"HTTP/1.1 200 OK\r\nContent-Length: five\r\n\r\nhello".to_vec());
}

#[test]
fn conflicting_content_lengths_are_a_parse_error() {
    expect_parse_errors(
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!".to_vec(),
    );
}

#[test]
fn bad_chunk_is_a_parse_error() {
    expect_parse_errors(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n".to_vec(),
    );
}

#[test]
fn oversized_head_is_a_parse_error_but_a_large_one_is_fine() {
    let head = |filler: usize| {
        format!(
            "HTTP/1.1 200 OK\r\nX-Filler: {}\r\nContent-Length: 2\r\n\r\nok",
            "a".repeat(filler)
        )
        .into_bytes()
    };
    expect_parse_errors(head(20 * 1024));

    // Control: a 15 KB head fits in the 16 KiB buffer.
    let big = head(15_000);
    let len = big.len() as u64;
    let server = ServerBuilder::new(move |_| Reply::Send(big.clone())).start();
    let (_run, r) = load(
        &server.url("/"),
        &["-n", "10", "-c", "1", "--timeout", "5s"],
    );
    r.assert_attempts(10);
    assert_eq!(r.status(200), 10, "{r}");
    assert_eq!(r.u("/bytes_read"), 10 * len, "{r}");
}

// -----------------------------------------------------------------------------------------
// 7. Response framing: chunked with trailers, HEAD, 204, 304, 1xx
// -----------------------------------------------------------------------------------------

fn framing_response(req: &Request) -> Vec<u8> {
    match req.path.as_str() {
        "/chunked" => {
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n\
                       5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: abc\r\nX-Two: 2\r\n\r\n"
                .to_vec()
        }
        // A HEAD response announces the body it would have, and sends none.
        "/head" => b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n".to_vec(),
        // 204 and 304 never have a body, whatever Content-Length says.
        "/204" => b"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n".to_vec(),
        "/304" => b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 7\r\n\r\n".to_vec(),
        "/continue" => {
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()
        }
        // Bodies larger than the 16 KiB read buffer.
        "/big" => ok_response(&"b".repeat(100_000)),
        "/bigchunked" => {
            let chunk = "c".repeat(30_000);
            format!(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{len:x}\r\n{chunk}\r\n{len:x}\r\n{chunk}\r\n0\r\n\r\n",
                len = chunk.len()
            )
            .into_bytes()
        }
        _ => HELLO.to_vec(),
    }
}

fn check_framing(pipeline: &str) {
    let server = ServerBuilder::new(|req| Reply::Send(framing_response(req))).start();
    let dir = TempDir::new("framing");
    let mix = dir.write(
        "mix.txt",
        "2 /chunked\n2 HEAD /head\n1 /204\n1 /304\n1 /continue\n1 /plain\n1 /big\n1 /bigchunked\n",
    );
    let (run, r) = load(
        &server.url("/"),
        &[
            "--urls",
            &path_str(&mix),
            "-n",
            "400",
            "-c",
            "2",
            "--timeout",
            "2s",
            "--pipeline",
            pipeline,
        ],
    );
    assert!(
        run.elapsed < Duration::from_secs(10),
        "took {:?}",
        run.elapsed
    );
    r.assert_attempts(400);
    assert_eq!(r.requests(), 400, "{r}");
    assert_eq!(r.failed_attempts(), 0, "{r}");

    let requests = server.requests();
    assert_eq!(requests.len(), 400);
    assert!(requests
        .iter()
        .filter(|r| r.path == "/head")
        .all(|r| r.method == "HEAD"));
    let count = |p: &str| server.count_path(p);
    for p in [
        "/chunked",
        "/head",
        "/204",
        "/304",
        "/continue",
        "/plain",
        "/big",
        "/bigchunked",
    ] {
        assert!(count(p) > 0, "the mix never drew {p}");
    }
    let ok_paths = [
        "/chunked",
        "/head",
        "/continue",
        "/plain",
        "/big",
        "/bigchunked",
    ];
    assert_eq!(
        r.status(200),
        ok_paths.iter().map(|p| count(p)).sum::<u64>(),
        "{r}"
    );
    assert_eq!(r.status(204), count("/204"), "{r}");
    assert_eq!(r.status(304), count("/304"), "{r}");
    assert_eq!(r.err("status"), count("/304"), "304 is not 2xx:\n{r}");
    // Every byte sent was read as part of the response it belongs to.
    let sent: u64 = requests
        .iter()
        .map(|r| framing_response(r).len() as u64)
        .sum();
    assert_eq!(r.u("/bytes_read"), sent, "{r}");
    assert_eq!(
        server.accepted(),
        2,
        "no connection was lost to a framing mistake"
    );
}

#[test]
fn chunked_trailers_head_204_304_and_1xx_are_framed_right() {
    check_framing("1");
}

#[test]
fn bodyless_responses_are_framed_right_when_pipelined() {
    check_framing("8");
}

#[test]
fn responses_dribbled_a_few_bytes_at_a_time_are_reassembled() {
    let response = framing_response(&Request {
        conn: 0,
        index: 0,
        method: "GET".into(),
        path: "/chunked".into(),
        headers: Vec::new(),
        body: Vec::new(),
    });
    let len = response.len() as u64;
    let server = ServerBuilder::new(move |_| Reply::Dribble(response.clone(), 7)).start();
    let (_run, r) = load(
        &server.url("/"),
        &["-n", "20", "-c", "2", "--timeout", "5s"],
    );
    r.assert_attempts(20);
    assert_eq!(r.status(200), 20, "{r}");
    assert_eq!(r.u("/bytes_read"), 20 * len, "{r}");
    assert_eq!(server.accepted(), 2);
}

#[test]
fn http10_body_until_close_is_a_complete_response() {
    let server = ServerBuilder::new(|_| {
        Reply::SendThenClose(b"HTTP/1.0 200 OK\r\n\r\nuntil the close".to_vec())
    })
    .start();
    let (_run, r) = load(
        &server.url("/"),
        &["-n", "20", "-c", "2", "--timeout", "5s"],
    );
    r.assert_attempts(20);
    assert_eq!(r.status(200), 20, "{r}");
    assert_eq!(r.err("total"), 0, "{r}");
    assert_eq!(r.u("/actual/server_closed"), 20, "{r}");
    assert_eq!(server.accepted(), 20);
}

// -----------------------------------------------------------------------------------------
// 8. Status codes, error rate, no server
// -----------------------------------------------------------------------------------------

#[test]
fn non_2xx_responses_are_status_errors_and_max_error_rate_sets_the_exit_status() {
    // Every fourth request (by arrival) gets a 500.
    let server = ServerBuilder::new(|req| {
        if req.index % 4 == 3 {
            Reply::Send(status_response(500, "Internal Server Error", "oops"))
        } else {
            Reply::Send(HELLO.to_vec())
        }
    })
    .start();
    let url = server.url("/");

    let (_run, r) = load(&url, &["-n", "200", "-c", "2"]);
    r.assert_attempts(200);
    assert_eq!(r.requests(), 200, "a 500 is a response:\n{r}");
    assert_eq!(r.status(500), 50, "{r}");
    assert_eq!(r.status(200), 150, "{r}");
    assert_eq!(r.err("status"), 50, "{r}");
    assert_eq!(r.err("total"), 50, "{r}");
    assert!((r.f("/error_rate") - 0.25).abs() < 1e-9, "{r}");

    let run = load_run(&url, &["-n", "200", "-c", "2", "--max-error-rate", "1"]);
    assert_eq!(run.code(), Some(3), "{run:?}");
    assert!(run.stderr.contains("exceeds --max-error-rate"), "{run:?}");
    let r = run.report();
    assert_eq!(r.status(500), 50, "the JSON is still written:\n{r}");

    let run = load_run(&url, &["-n", "200", "-c", "2", "--max-error-rate", "30"]);
    assert_eq!(run.code(), Some(0), "25% errors are within 30%:\n{run:?}");
}

#[test]
fn closed_port_gives_connect_errors_and_dash_n_ends() {
    let url = format!("http://127.0.0.1:{}/", closed_port());
    // No response at all: exit status 4, with the report still written.
    let (run, r) = load_without_response(&url, &["-n", "5", "-c", "1"]);
    assert!(
        run.elapsed < Duration::from_secs(10),
        "took {:?}",
        run.elapsed
    );
    r.assert_attempts(5);
    assert_eq!(r.err("connect"), 5, "{r}");
    assert_eq!(r.requests(), 0, "{r}");
    assert!(r.has_warning("every connect failed"), "{r}");

    let run = load_run(
        &url,
        &["-n", "6", "-c", "3", "-t", "2", "--max-error-rate", "50"],
    );
    assert_eq!(run.code(), Some(3), "{run:?}");
    let r = run.report();
    r.assert_attempts(6);
    assert_eq!(r.err("connect"), 6, "{r}");
}

// -----------------------------------------------------------------------------------------
// 9. Puma with the bundled Rack app
// -----------------------------------------------------------------------------------------

#[test]
fn puma_serves_the_rack_hello_app() {
    let config = workspace_root().join("ruby/apps/rack-hello/config.ru");
    let puma = Puma::start(&config);
    let run = load_run(&puma.url(), &["-n", "2000", "-c", "4", "--timeout", "10s"]);
    assert_eq!(run.code(), Some(0), "{run:?}\npuma log:\n{}", puma.log());
    let r = run.report();
    r.assert_attempts(2000);
    assert_eq!(r.requests(), 2000, "{r}");
    assert_eq!(r.status(200), 2000, "{r}");
    assert_eq!(r.err("total"), 0, "{r}\npuma log:\n{}", puma.log());
    // Each response carries the app's 14-byte body.
    assert!(r.u("/bytes_read") >= 2000 * 14, "{r}");
}

// -----------------------------------------------------------------------------------------
// 10. Raw and HDR outputs
// -----------------------------------------------------------------------------------------

#[test]
fn raw_log_has_one_line_per_recorded_attempt() {
    let ok = HELLO.to_vec();
    let fail = status_response(500, "Internal Server Error", "oops");
    let (ok_len, fail_len) = (ok.len() as u64, fail.len() as u64);
    let server = ServerBuilder::new(move |req| match req.path.as_str() {
        "/ok" => Reply::Send(ok.clone()),
        "/fail" => Reply::Send(fail.clone()),
        _ => Reply::Reset,
    })
    .start();
    let dir = TempDir::new("raw");
    let mix = dir.write("mix.txt", "# ok, fail, reset\n6 /ok\n2 /fail\n1 /reset\n");
    let raw = dir.path("raw.tsv");
    let json = dir.path("report.json");
    let run = rubyrace(&[
        "load",
        &server.url("/"),
        "--urls",
        &path_str(&mix),
        "-n",
        "300",
        "-c",
        "2",
        "--timeout",
        "5s",
        "--raw",
        &path_str(&raw),
        "--json",
        &path_str(&json),
    ]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stdout.contains("rubyrace load"),
        "the summary goes to stdout with --json FILE"
    );
    let r = Report(serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap());
    r.assert_attempts(300);
    assert!(
        r.err("read") > 0 && r.status(500) > 0 && r.status(200) > 0,
        "{r}"
    );
    assert_eq!(r.err("read"), server.count_path("/reset"), "{r}");

    // Each output was written under a temporary name and renamed into place.
    let mut left: Vec<String> = std::fs::read_dir(dir.path(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["mix.txt", "raw.tsv", "report.json"],
        "no temporary file is left"
    );

    let text = std::fs::read_to_string(&raw).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("# rubyrace raw v1"));
    assert_eq!(
        lines.next(),
        Some("start_ns\tlatency_ns\tstatus\tbytes\tconn\turl\terror")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split('\t').collect()).collect();
    assert_eq!(
        rows.len() as u64,
        r.requests() + r.failed_attempts(),
        "one line per response or lost request:\n{r}"
    );

    let num = |s: &str| {
        s.parse::<u64>()
            .unwrap_or_else(|_| panic!("{s:?} is not a number"))
    };
    let mut by_status: BTreeMap<u64, u64> = BTreeMap::new();
    let mut by_url = [0u64; 3];
    let mut by_conn = [0u64; 2];
    let max_start_ns = (r.f("/elapsed_s") * 1e9) as u64 + 1_000_000;
    for row in &rows {
        assert_eq!(row.len(), 7, "{row:?}");
        let (start, latency, status, bytes, conn, url) = (
            num(row[0]),
            num(row[1]),
            num(row[2]),
            num(row[3]),
            num(row[4]) as usize,
            num(row[5]) as usize,
        );
        assert!(
            start <= max_start_ns,
            "start_ns {start} after the recorded phase: {row:?}"
        );
        assert!(latency > 0, "{row:?}");
        assert!(conn < 2, "conn is a slot 0..c-1: {row:?}");
        assert!(url < 3, "url is an index into the mix: {row:?}");
        by_conn[conn] += 1;
        by_url[url] += 1;
        *by_status.entry(status).or_default() += 1;
        match (url, row[6]) {
            (0, "-") => assert_eq!((status, bytes), (200, ok_len), "{row:?}"),
            (1, "-") => assert_eq!((status, bytes), (500, fail_len), "{row:?}"),
            (2, "read") => assert_eq!((status, bytes), (0, 0), "{row:?}"),
            _ => panic!("unexpected line {row:?}"),
        }
    }
    assert_eq!(by_status.get(&200).copied().unwrap_or(0), r.status(200));
    assert_eq!(by_status.get(&500).copied().unwrap_or(0), r.status(500));
    assert_eq!(by_status.get(&0).copied().unwrap_or(0), r.err("read"));
    assert_eq!(
        by_url,
        [
            server.count_path("/ok"),
            server.count_path("/fail"),
            server.count_path("/reset")
        ]
    );
    assert_eq!(by_conn, [150, 150], "-n 300 over two connection slots");
}

#[test]
fn hdr_log_holds_one_interval_matching_the_report() {
    let server = Server::hello();
    let dir = TempDir::new("hdr");
    let hdr = dir.path("latency.hlog");
    let (_run, r) = load(
        &server.url("/"),
        &["-n", "300", "-c", "2", "--hdr", &path_str(&hdr)],
    );
    r.assert_attempts(300);
    let text = std::fs::read_to_string(&hdr).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with('#'),
        "the log starts with comments:\n{text}"
    );
    assert!(text.contains("#[StartTime:"), "{text}");
    assert!(text.contains("#[BaseTime:"), "{text}");
    assert!(
        text.contains("#[MaxValueDivisor: 1000000.000]"),
        "the max column is in ms:\n{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with('#') && l.contains("rubyrace load")),
        "{text}"
    );
    let first_data = lines
        .iter()
        .position(|l| !l.starts_with('#'))
        .expect("an interval line");
    assert!(
        lines[first_data..].iter().all(|l| !l.starts_with('#')),
        "comments come first:\n{text}"
    );
    // The CSV legend line is optional in the format; skip it if present.
    let intervals: Vec<&str> = lines[first_data..]
        .iter()
        .copied()
        .filter(|l| !l.is_empty() && !l.starts_with("\"StartTimestamp\""))
        .collect();
    assert_eq!(intervals.len(), 1, "one interval line:\n{text}");

    let fields: Vec<&str> = intervals[0].split(',').collect();
    assert_eq!(
        fields.len(),
        5,
        "Tag, start, length, max, histogram: {}",
        intervals[0]
    );
    assert_eq!(fields[0], "Tag=latency");
    let length: f64 = fields[2].parse().unwrap();
    assert!(
        (length - r.f("/elapsed_s")).abs() < 0.002,
        "interval length {length}:\n{r}"
    );
    let max_ms: f64 = fields[3].parse().unwrap();
    let want_ms = r.f("/latency_us/max") / 1000.0;
    assert!(
        (max_ms - want_ms).abs() <= want_ms * 0.01 + 0.001,
        "max {max_ms} ms, report {want_ms} ms"
    );
    assert!(
        fields[4].len() > 20 && fields[4].starts_with("HIST"),
        "a base64 V2 histogram: {}",
        fields[4]
    );
}

// -----------------------------------------------------------------------------------------
// 11. Ctrl-C
// -----------------------------------------------------------------------------------------

#[test]
fn ctrl_c_prints_what_ran_and_exits_130() {
    let server = Server::hello();
    let url = server.url("/");
    let running = spawn(&["load", &url, "-d", "30s", "-c", "2", "--json", "-"]);
    assert!(
        server.wait_for_requests(100, Duration::from_secs(10)),
        "the load never started ({} requests)",
        server.request_count()
    );
    let sent = Instant::now();
    // SAFETY: kill(2) on our own child, by its pid.
    let rc = unsafe { libc::kill(running.pid() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0);
    let run = running.wait(Duration::from_secs(25));
    let after = sent.elapsed();
    assert!(
        after < Duration::from_secs(3),
        "exit took {after:?} after SIGINT"
    );
    assert_eq!(run.code(), Some(130), "{run:?}");
    let r = run.report();
    r.assert_consistent();
    assert!(r.b("/interrupted"), "{r}");
    assert!(r.has_warning("interrupted"), "{r}");
    assert!(r.requests() >= 100, "{r}");
    assert!(
        r.f("/elapsed_s") < 20.0,
        "the recorded phase ends at the interrupt:\n{r}"
    );
    assert!(
        run.stderr.contains("rubyrace load"),
        "the summary goes to stderr:\n{run:?}"
    );
    assert!(run.stderr.contains("warning: interrupted"), "{run:?}");
}

// -----------------------------------------------------------------------------------------
// 12. Bad input and rough edges
// -----------------------------------------------------------------------------------------

/// A minimal keepalive HTTP/1.1 responder (`HELLO` to every bodyless request) for what
/// `crate::support::Server` cannot do: listen on an IPv6 address, and stop accepting after a
/// number of connections while the accepted ones go on being served. Stopped and joined
/// on drop.
struct TinyServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    /// The Host header of every request, in arrival order.
    hosts: Arc<Mutex<Vec<String>>>,
    accept: Option<JoinHandle<()>>,
}

impl TinyServer {
    /// Listens on `bind` (an address with port 0); the bind error is returned, so that a
    /// caller can tell a machine without that address.
    fn start(bind: &str, accept_at_most: usize, then: WhenFull) -> io::Result<TinyServer> {
        let listener = TcpListener::bind(bind)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let hosts = Arc::new(Mutex::new(Vec::new()));
        let (accept_stop, accept_count, accept_hosts) =
            (stop.clone(), accepted.clone(), hosts.clone());
        let accept = std::thread::spawn(move || {
            let mut listener = Some(listener);
            let mut parked = None;
            let mut handlers = Vec::new();
            while !accept_stop.load(Ordering::SeqCst) {
                let Some(open) = &listener else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                match open.accept() {
                    Ok((stream, _)) => {
                        if accept_count.fetch_add(1, Ordering::SeqCst) + 1 >= accept_at_most {
                            match then {
                                // Every later connect is refused.
                                WhenFull::CloseListener => listener = None,
                                // Later connects complete into the accept queue and wait.
                                WhenFull::StopAccepting => {
                                    parked = listener.take();
                                }
                            }
                        }
                        let (stop, hosts) = (accept_stop.clone(), accept_hosts.clone());
                        handlers.push(std::thread::spawn(move || {
                            serve_hello(stream, &stop, &hosts)
                        }));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
            drop(parked);
            for handler in handlers {
                let _ = handler.join();
            }
        });
        Ok(TinyServer {
            addr,
            stop,
            accepted,
            hosts,
            accept: Some(accept),
        })
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn hosts(&self) -> Vec<String> {
        self.hosts.lock().unwrap().clone()
    }
}

/// What a `TinyServer` does once it has accepted its connections.
#[derive(Clone, Copy)]
enum WhenFull {
    /// Close its listener: later connects are refused.
    CloseListener,
    /// Keep listening without accepting: later connects complete into the kernel's accept
    /// queue (the client sees them open) and are never answered.
    StopAccepting,
}

impl Drop for TinyServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// Answers `HELLO` to each request head (requests without a body) until EOF or the stop flag.
fn serve_hello(mut stream: TcpStream, stop: &AtomicBool, hosts: &Mutex<Vec<String>>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !stop.load(Ordering::SeqCst) {
        match stream.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return,
        }
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            buf.drain(..end + 4);
            let host = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(name, _)| name.eq_ignore_ascii_case("host"))
                .map(|(_, value)| value.trim().to_string())
                .unwrap_or_default();
            hosts.lock().unwrap().push(host);
            if stream.write_all(HELLO).is_err() {
                return;
            }
        }
    }
}

/// Item 9: port 0 is no server's port.
#[test]
fn port_0_is_invalid_usage() {
    let run = rubyrace(&["load", "http://127.0.0.1:0/", "-n", "1"]);
    assert_eq!(run.code(), Some(EXIT_USAGE), "{run:?}");
    assert!(run.stderr.contains("port 0"), "{run:?}");
}

/// Item 9: a run that got no response at all does not exit 0.
#[test]
fn a_run_without_any_response_exits_4_and_still_reports() {
    let url = format!("http://127.0.0.1:{}/", closed_port());
    let run = load_run(&url, &["-n", "3", "-c", "1"]);
    assert_eq!(run.code(), Some(EXIT_NO_RESPONSE), "{run:?}");
    let r = run.report();
    r.assert_attempts(3);
    assert_eq!(r.err("connect"), 3, "{r}");
    assert!(
        run.stderr.contains("rubyrace: no response"),
        "the exit status is explained:\n{run:?}"
    );
    // The same with a duration, and with a server that answers nothing.
    let server = ServerBuilder::new(|_| Reply::Hang).start();
    let run = load_run(&server.url("/"), &["-d", "300ms", "-c", "1"]);
    assert_eq!(run.code(), Some(EXIT_NO_RESPONSE), "{run:?}");
    assert_eq!(run.report().u("/in_flight_at_end"), 1);
}

/// Item 10: IPv6 literals, against a server listening on [::1].
#[test]
fn ipv6_literal_urls_reach_a_server_on_the_ipv6_loopback() {
    let server = match TinyServer::start("[::1]:0", usize::MAX, WhenFull::CloseListener) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("skipped: this machine has no IPv6 loopback ([::1]: {e})");
            return;
        }
    };
    let url = server.url();
    assert!(url.starts_with("http://[::1]:"), "{url}");
    let (_run, r) = load(&url, &["-n", "20", "-c", "2"]);
    r.assert_attempts(20);
    assert_eq!(r.status(200), 20, "{r}");
    assert_eq!(r.value("/target/addr"), &server.addr.to_string());
    assert_eq!(server.accepted(), 2);
    let hosts = server.hosts();
    assert_eq!(hosts.len(), 20);
    let want = format!("[::1]:{}", server.addr.port());
    assert!(hosts.iter().all(|h| *h == want), "Host headers {hosts:?}");
}

/// Item 11: how many connections were really open at once, and why the others were not.
#[test]
fn peak_open_connections_are_reported_with_why_the_others_were_not() {
    // Serves 4 connections, then closes its listener: every later connect is refused.
    // Connects leave 20 ms apart, so the fifth comes after the listener is closed.
    let server = TinyServer::start("127.0.0.1:0", 4, WhenFull::CloseListener).unwrap();
    let (run, r) = load(
        &server.url(),
        &["-c", "8", "-d", "700ms", "--connect-stagger", "20ms"],
    );
    r.assert_consistent();
    assert_eq!(server.accepted(), 4);
    assert!(r.requests() > 0, "{r}");
    assert_eq!(r.u("/actual/connections"), 8, "{r}");
    assert_eq!(r.u("/actual/connections_opened"), 4, "{r}");
    assert_eq!(r.u("/actual/peak_open"), 4, "{r}");
    assert_eq!(r.u("/actual/peak_open_answered"), 4, "{r}");
    assert!(
        r.b("/actual/peak_open_exact"),
        "one thread counts exactly:\n{r}"
    );
    assert_eq!(r.u("/actual/open_at_end"), 4, "{r}");
    let refused = r.u("/actual/connect_failures/refused");
    assert!(refused >= 4, "4 slots were refused at least once:\n{r}");
    for kind in ["reset", "timed_out", "no_local_port", "other"] {
        assert_eq!(
            r.u(&format!("/actual/connect_failures/{kind}")),
            0,
            "{kind}:\n{r}"
        );
    }
    assert!(
        r.has_warning("only 4 of 8 connections were open at once"),
        "{r}"
    );
    assert!(
        run.stderr.contains("4 of 8 open at once"),
        "the summary says how many were open:\n{run:?}"
    );
    assert!(
        run.stderr.contains(&format!("refused {refused}")),
        "the summary says why the others were not:\n{run:?}"
    );

    // Open is not served: 2 connections are served, 4 more wait in the accept queue of a
    // server that no longer accepts. They are open on the client's side, never answered.
    let server = TinyServer::start("127.0.0.1:0", 2, WhenFull::StopAccepting).unwrap();
    let (run, r) = load(
        &server.url(),
        &["-c", "6", "-d", "700ms", "--connect-stagger", "20ms"],
    );
    r.assert_consistent();
    assert_eq!(server.accepted(), 2);
    assert_eq!(r.u("/actual/peak_open"), 6, "{r}");
    assert_eq!(r.u("/actual/peak_open_answered"), 2, "{r}");
    assert_eq!(r.u("/actual/connect_failures/total"), 0, "{r}");
    // The 4 waiting connections' requests are still unanswered at the end.
    assert!(r.u("/in_flight_at_end") >= 4, "{r}");
    assert!(
        r.has_warning("at most 2 open at once had had a response"),
        "{r}"
    );
    assert!(
        run.stderr
            .contains("at most 2 open at once had had a response"),
        "{run:?}"
    );

    // Two threads: each counts its own connections; the peak over both is sampled.
    let server = TinyServer::start("127.0.0.1:0", 6, WhenFull::CloseListener).unwrap();
    let (_run, r) = load(
        &server.url(),
        &[
            "-c",
            "8",
            "-t",
            "2",
            "-d",
            "700ms",
            "--connect-stagger",
            "20ms",
        ],
    );
    r.assert_consistent();
    assert_eq!(server.accepted(), 6);
    // Thread 0 owns slots 0-3 and thread 1 slots 4-7; slots 0-5 got a connection.
    let per_thread: Vec<u64> = r
        .value("/actual/peak_open_per_thread")
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(per_thread, vec![4, 2], "{r}");
    assert_eq!(r.u("/actual/peak_open"), 6, "{r}");
    assert_eq!(r.u("/actual/peak_open_answered"), 6, "{r}");
    assert!(!r.b("/actual/peak_open_exact"), "{r}");
}

/// Item 11: ports left in TIME_WAIT towards the target are reported.
#[test]
fn ports_left_in_time_wait_are_reported() {
    let server = Server::hello();
    // The client closes first after every response: its ports stay in TIME_WAIT.
    let (run, r) = load(&server.url("/"), &["--client-close", "-n", "40", "-c", "1"]);
    r.assert_attempts(40);
    let local = r.u("/actual/time_wait/local_ports");
    assert!(local >= 1, "40 client closes left no TIME_WAIT:\n{r}");
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
    let range: Vec<u64> = range
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(
        [
            r.u("/actual/time_wait/local_port_range/0"),
            r.u("/actual/time_wait/local_port_range/1")
        ],
        [range[0], range[1]],
        "{r}"
    );
    assert!(
        run.stderr
            .contains(&format!("TIME_WAIT     {local} local ports")),
        "{run:?}"
    );
}

/// Item 15: a bad line of a URL mix is explained: file, line, field and what was expected.
#[test]
fn url_mix_errors_say_what_is_wrong_with_the_line() {
    let server = Server::hello();
    let dir = TempDir::new("badmix");
    let cases = [
        (
            "# three fields: the first must be a weight\nabc GET /x\n",
            "2: field 1 \"abc\": expected a weight (a positive integer), since the line has 3 fields; a line is \"[WEIGHT] [METHOD] PATH\"",
        ),
        (
            "/ok\n1 GET / extra\n",
            "2: field 4 \"extra\": one field too many; a line is \"[WEIGHT] [METHOD] PATH\"",
        ),
        (
            "1.5 /a\n",
            "1: field 1 \"1.5\": expected a weight (a positive integer) or an upper-case method",
        ),
        (
            "2 get /a\n",
            "1: field 2 \"get\": expected an upper-case HTTP method such as GET",
        ),
        ("GET a\n", "1: field 2 \"a\": expected a path starting with '/'"),
        ("0 /a\n", "1: field 1 \"0\": a weight must be at least 1"),
    ];
    for (index, (text, want)) in cases.iter().enumerate() {
        let mix = path_str(&dir.write(&format!("mix{index}.txt"), text));
        let run = rubyrace(&["load", &server.url("/"), "--urls", &mix, "-n", "1"]);
        assert_eq!(run.code(), Some(1), "{text:?}\n{run:?}");
        let want = format!("{mix}:{want}");
        assert!(
            run.stderr.contains(&want),
            "{text:?}: expected {want:?} in\n{run:?}"
        );
    }
    assert_eq!(server.accepted(), 0, "no load is sent when the mix is bad");
}

/// Items 16 and 17: every invalid use exits 2, names what is wrong, and sends nothing.
#[test]
fn invalid_usage_exits_2_before_any_load() {
    let server = Server::hello();
    let url = server.url("/");
    let cases: &[(&[&str], &str)] = &[
        (&["-n", "1", "-c", "0"], "--connections"),
        (
            &["-n", "1", "--rate", "0"],
            "--rate must be a positive number",
        ),
        (
            &["-n", "1", "--timeout", "0s"],
            "--timeout must be longer than zero",
        ),
        (
            &["-n", "1", "-m", "get"],
            "-m \"get\" is not an upper-case HTTP method",
        ),
        (
            &["-n", "1", "--pipeline", "4", "--close-header"],
            "--pipeline needs keepalive connections",
        ),
        (&["-d", "0s"], "--duration must be longer than zero"),
        (&["-n", "1", "--max-error-rate", "101"], "--max-error-rate"),
        (&["-n", "1", "-H", "no colon"], "header \"no colon\""),
        (
            &["--duration=-5s"],
            "\"-5s\": a duration cannot be negative",
        ),
        (
            &["-n", "1", "--timeout", "ten"],
            "\"ten\" is not a duration such as",
        ),
    ];
    for (args, want) in cases {
        let mut all = vec!["load", url.as_str()];
        all.extend_from_slice(args);
        let run = rubyrace(&all);
        assert_eq!(run.code(), Some(EXIT_USAGE), "{run:?}");
        assert!(run.stderr.contains(want), "expected {want:?} in\n{run:?}");
    }
    assert_eq!(server.accepted(), 0, "no load is sent on invalid usage");
}

/// Item 17: a URL without `http://` says so, with the URL it probably meant.
#[test]
fn url_without_http_scheme_suggests_it() {
    let port = closed_port();
    for given in [format!("127.0.0.1:{port}/"), format!("localhost:{port}/")] {
        let run = rubyrace(&["load", &given, "-n", "1"]);
        assert_eq!(run.code(), Some(EXIT_USAGE), "{run:?}");
        let want = format!("http:// is missing: did you mean http://{given}?");
        assert!(run.stderr.contains(&want), "expected {want:?} in\n{run:?}");
    }
    // https:// needs to know whom to trust (tests/it/tls.rs runs it); other schemes are refused.
    let run = rubyrace(&["load", "https://127.0.0.1:9/", "-n", "1"]);
    assert_eq!(run.code(), Some(EXIT_USAGE), "{run:?}");
    assert!(run.stderr.contains("needs --cacert FILE"), "{run:?}");
    let run = rubyrace(&["load", "ftp://127.0.0.1:9/", "-n", "1"]);
    assert_eq!(run.code(), Some(EXIT_USAGE), "{run:?}");
    assert!(
        run.stderr.contains("only http:// and https:// URLs"),
        "{run:?}"
    );
}

/// Item 21: the tables of docs/load.md are well formed: each row has as many cells as its
/// header (a Markdown renderer drops the extra ones, and with them text).
#[test]
fn every_row_of_the_tables_in_docs_load_md_has_as_many_cells_as_its_header() {
    let path = workspace_root().join("docs/load.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let cells = |line: &str| {
        let inner = line.trim().trim_start_matches('|');
        let inner = inner.strip_suffix('|').unwrap_or(inner);
        // A `\|` is a pipe inside a cell, not a separator.
        inner.replace("\\|", "").split('|').count()
    };
    let mut header: Option<usize> = None;
    let mut tables = 0;
    let mut bad = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if !line.trim_start().starts_with('|') {
            header = None;
            continue;
        }
        match header {
            None => {
                header = Some(cells(line));
                tables += 1;
            }
            Some(want) => {
                if cells(line) != want {
                    bad.push(format!(
                        "line {}: {} cells, header has {want}",
                        index + 1,
                        cells(line)
                    ));
                }
            }
        }
    }
    assert!(
        tables >= 5,
        "found only {tables} tables in {}",
        path.display()
    );
    assert!(bad.is_empty(), "{}:\n{}", path.display(), bad.join("\n"));
}

// -----------------------------------------------------------------------------------------
// Engine bugs found by these tests (ignored until fixed; run with `-- --ignored`)
// -----------------------------------------------------------------------------------------

#[test]
fn regression_timeouts_count_as_reconnects() {
    let server = ServerBuilder::new(|_| Reply::Hang).start();
    let (_run, r) = load_without_response(
        &server.url("/"),
        &["--timeout", "200ms", "-n", "4", "-c", "2"],
    );
    r.assert_attempts(4);
    assert_eq!(r.err("timeout"), 4, "{r}");
    // Each connection timed out twice; the first timeout of each replaced it.
    assert!(server.accepted() >= 4, "accepted {}", server.accepted());
    assert!(
        r.u("/actual/reconnects") >= 2,
        "docs: a timeout is an error and its connection is replaced; reconnects counts \
         connections replaced after an error:\n{r}"
    );
}

#[test]
fn regression_connect_that_never_completes_is_bounded_by_timeout_with_dash_n() {
    let backlog = FullBacklog::start();
    assert!(
        backlog.connect_hangs(Duration::from_millis(300)),
        "the accept queue is not full"
    );
    // Each connect stays in SYN-SENT (the kernel retries for about 2 minutes).
    let run = spawn(&[
        "load",
        &backlog.url(),
        "-n",
        "3",
        "-c",
        "3",
        "--timeout",
        "500ms",
        "--json",
        "-",
    ])
    .wait(Duration::from_secs(15));
    assert_eq!(run.code(), Some(EXIT_NO_RESPONSE), "{run:?}");
    let r = run.report();
    r.assert_attempts(3);
    assert_eq!(r.requests(), 0, "{r}");
}

#[test]
fn regression_connect_that_never_completes_is_counted_with_a_duration() {
    let backlog = FullBacklog::start();
    assert!(
        backlog.connect_hangs(Duration::from_millis(300)),
        "the accept queue is not full"
    );
    let (run, r) = load_without_response(
        &backlog.url(),
        &["-d", "1s", "-c", "2", "--timeout", "200ms"],
    );
    r.assert_consistent();
    assert!(
        r.err("connect") > 0,
        "nobody could connect, yet no error is reported:\n{r}"
    );
    // Why no connection was ever open: every connect timed out.
    assert_eq!(r.u("/actual/peak_open"), 0, "{r}");
    assert!(r.u("/actual/connect_failures/timed_out") > 0, "{r}");
    assert!(
        run.stderr.contains("0 of 2 open at once"),
        "the summary says how many were open:\n{run:?}"
    );
    assert!(
        run.stderr.contains("timed out"),
        "the summary says why the others were not:\n{run:?}"
    );
}

#[test]
fn regression_unsolicited_bytes_are_a_parse_error_not_a_response() {
    let server = ServerBuilder::new(|req| {
        if req.index == 0 {
            // Two responses to the first request: the second answers nothing.
            Reply::Send([HELLO, HELLO].concat())
        } else {
            Reply::Send(HELLO.to_vec())
        }
    })
    .start();
    let (_run, r) = load(
        &server.url("/"),
        &["-n", "10", "-c", "1", "--timeout", "2s"],
    );
    r.assert_consistent();
    assert!(
        r.err("parse") >= 1,
        "docs: bytes nobody asked for are a parse error; the extra response was counted \
         as the answer to the next request instead:\n{r}"
    );
}

#[test]
fn regression_close_that_arrives_with_the_response_is_not_an_error() {
    // The response and the FIN arrive in one segment: when rubyrace reads the response it
    // already knows the server closed, while nothing was in flight. That is the clean,
    // unannounced close the docs call "closed while idle": not an error.
    let server = ServerBuilder::new(|_| Reply::SendThenClose(HELLO.to_vec())).start();
    let (_run, r) = load(
        &server.url("/"),
        &["-n", "20", "-c", "1", "--timeout", "5s"],
    );
    r.assert_attempts(20);
    assert_eq!(
        (r.requests(), r.err("read")),
        (20, 0),
        "a request was written after the server's FIN had been read, then lost:\n{r}"
    );
    assert_eq!(r.u("/actual/server_closed"), 20, "{r}");
    assert_eq!(server.request_count(), 20);
}

/// RFC 9112 §9.6: a client that reads `Connection: close` in a response closes after it.
/// rubyrace used to wait for the server's FIN, which made every request of a server that
/// closes late cost the whole grace period and counted it as ignoring the header.
#[test]
fn regression_announced_close_is_honoured_without_waiting_for_the_fin() {
    let announced =
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".to_vec();
    let server = ServerBuilder::new(move |_| {
        Reply::SendThenCloseAfter(announced.clone(), Duration::from_millis(500))
    })
    .ignore_close()
    .start();
    let started = std::time::Instant::now();
    let (_run, r) = load(
        &server.url("/"),
        &[
            "--close-header",
            "--close-grace",
            "2s",
            "-n",
            "20",
            "-c",
            "1",
        ],
    );
    r.assert_attempts(20);
    assert_eq!(r.status(200), 20, "{r}");
    assert_eq!(r.u("/close_ignored"), 0, "{r}");
    assert_eq!(r.u("/actual/connections_opened"), 20, "{r}");
    // Waiting for each FIN would take 20 × 500 ms.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}
