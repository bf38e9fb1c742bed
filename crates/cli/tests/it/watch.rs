//! `rubyrace watch` beside a real run of Puma (its frames read while the run writes), on
//! a run killed without a word, on a directory of runs, and on a real terminal (a pty from
//! util-linux's `script`): it exits when the run ends and on `q`. And `run --live-report`:
//! report.html replaced whole after every block.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::lab::Lab;
use crate::support::rubyrace;

/// Two configurations (Puma with 1 and 2 threads), blocks design, adaptive to a target it
/// cannot reach in `max` blocks: the stopping rule looks after every block from the sixth
/// (the fewest with which its rank test can decide) or `max`, whichever comes first.
fn adaptive(max: u32) -> String {
    format!(
        r#"
name = "watched"
batches = 2
precision = "0.1%"
max_batches = {max}
design = "blocks"

[settings]
app = "rack-hello"
connections = 2
warmup = "300ms"
duration = "1200ms"

[matrix]
threads = [1, 2]
"#
    )
}

pub(crate) fn watch_once(dir: &Path) -> String {
    let run = rubyrace(&["watch", dir.to_str().unwrap(), "--once"]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    run.stdout
}

/// Frames of `watch --once` until one satisfies `done` (every frame seen is returned).
/// Before `dir` holds a results directory (or one below it), a frame is watch's refusal.
fn frames_until(dir: &Path, within: Duration, done: impl Fn(&str) -> bool) -> Vec<String> {
    let start = Instant::now();
    let mut frames = Vec::new();
    loop {
        let run = rubyrace(&["watch", dir.to_str().unwrap(), "--once"]);
        let frame = if run.code() == Some(0) {
            run.stdout
        } else {
            format!("(watch exited {:?}: {})", run.code(), run.stderr)
        };
        let ok = done(&frame);
        frames.push(frame);
        if ok {
            return frames;
        }
        assert!(
            start.elapsed() < within,
            "no frame as expected within {within:?}; the last:\n{}",
            frames.last().unwrap()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn watch_follows_a_live_run_and_the_live_report_is_rewritten_after_every_block() {
    let lab = Lab::new("watch-live");
    lab.experiment(&adaptive(7));
    let dir = lab.results();
    let run = lab.spawn_run(&["--live-report"]);
    let pid = run.pid();

    // While it runs: its process, the current trial and its phase.
    let running = format!("running (pid {pid} on ");
    let frames = frames_until(&dir, Duration::from_secs(60), |f| {
        f.contains(&running) && f.contains("now: trial ") && f.contains("measuring")
    });
    let last = frames.last().unwrap();
    assert!(
        last.starts_with(&format!("rubyrace watch · {}", dir.display())),
        "{last}"
    );
    assert!(
        last.contains("design blocks · 2 configurations · blocks "),
        "{last}"
    );

    // After the sixth block, the stopping rule's first look, the comparisons, the live
    // report.
    let frames = frames_until(&dir, Duration::from_secs(150), |f| {
        f.contains("Stopping rule after 6 blocks (target ±0.1% on throughput")
    });
    let last = frames.last().unwrap();
    assert!(
        last.contains("Comparisons (against threads=1, 97.5% intervals)"),
        "{last}"
    );
    assert!(
        last.lines()
            .any(|l| l.trim_start().starts_with("threads=2") && l.contains("throughput")),
        "{last}"
    );
    let report = dir.join("report.html");
    assert!(report.is_file(), "no live report after six blocks");
    let first_report = std::fs::read_to_string(&report).unwrap();
    // (46.10) While the run is live, the page reloads itself.
    assert!(
        std::fs::read_to_string(&report)
            .unwrap()
            .contains("<meta http-equiv=\"refresh\" content=\"15\">"),
        "the live report does not reload itself"
    );
    // (46.11) Before its rule's first look, the plan is a minimum, and so is the time left.
    assert!(
        frames.iter().any(|f| f.contains(
            " done of at least 6 planned (its rule decides when it stops; its next look after 6 blocks) · trials "
        ) && f.contains(" of at least 12 stored")),
        "{}",
        frames.join("\n----\n")
    );
    assert!(
        frames
            .iter()
            .any(|f| f.contains("time left: at least ") && f.contains("to the rule's next look")),
        "{}",
        frames.join("\n----\n")
    );

    let end = run.wait(Duration::from_secs(300));
    assert_eq!(end.code(), Some(0), "{end:?}");
    assert!(
        end.stderr
            .contains("the report is rewritten after every block"),
        "{end:?}"
    );
    // Rewritten after the later blocks (and once more at the end, without the reload;
    // an inode freed by one rename may come back with the next, so the text is compared);
    // whole.
    let html = std::fs::read_to_string(&report).unwrap();
    assert_ne!(html, first_report, "report.html was not rewritten");
    assert!(
        html.trim_end().ends_with("</html>"),
        "{}",
        &html[html.len() - 200..]
    );
    assert!(html.contains("threads=2"));
    // (46.10) Once the run has ended, the page stays still.
    assert!(
        !html.contains("http-equiv=\"refresh\""),
        "the ended run's report still reloads"
    );
    // (46.11) The progress lines say the count is a minimum, and it never reads as a
    // smaller plan than the rule's next look: "[1/≥12]", not "[1/4]".
    assert!(end.stderr.contains("[1/≥12] block 1 · "), "{end:?}");
    assert!(end.stderr.contains("[14/≥14] block 7 · "), "{end:?}");
    assert!(!end.stderr.contains("[1/4]"), "{end:?}");

    // The finished run: its end, and the rule's last word.
    let last = watch_once(&dir);
    assert!(last.contains("watched · complete · "), "{last}");
    assert!(!last.contains("now: "), "{last}");
    assert!(last.contains("Stopping rule after 7 blocks"), "{last}");
    assert!(last.contains("the rule ended the run"), "{last}");
    assert!(
        last.contains("blocks 7 done of 7 planned · trials 14 of 14 stored"),
        "{last}"
    );
    lab.assert_no_leftovers(Duration::from_secs(5));
}

#[test]
fn a_run_killed_without_a_word_is_told_and_the_last_run_of_a_directory_is_watched() {
    let lab = Lab::new("watch-killed");
    lab.experiment(&adaptive(6));
    let dir = lab.results();
    let run = lab.spawn_run(&[]);
    let pid = run.pid();
    frames_until(&dir, Duration::from_secs(60), |f| f.contains("now: trial "));
    // SIGKILL: no chance to write its end.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let end = run.wait(Duration::from_secs(10));
    assert_eq!(end.code(), None, "{end:?}");
    let frame = watch_once(&dir);
    assert!(
        frame.contains(&format!("ended without a word: pid {pid} on ")),
        "{frame}"
    );
    assert!(
        frame.contains(&format!(
            "`rubyrace run --resume {}` goes on",
            dir.display()
        )),
        "{frame}"
    );
    lab.assert_no_leftovers(Duration::from_secs(5));

    // A directory of runs: the one written last is watched. An older copy beside it,
    // its files dated an hour back, is not.
    let parent = dir.parent().unwrap();
    let older = parent.join("older-run");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(&dir)
        .arg(&older)
        .status()
        .unwrap();
    assert!(copied.success());
    let dated = Command::new("find")
        .arg(&older)
        .args(["-exec", "touch", "-d", "1 hour ago", "{}", "+"])
        .status()
        .unwrap();
    assert!(dated.success());
    let frame = watch_once(parent);
    assert!(
        frame.starts_with(&format!("rubyrace watch · {}\n", dir.display())),
        "{frame}"
    );
    let none = rubyrace(&["watch", older.join("trials").to_str().unwrap(), "--once"]);
    assert_eq!(none.code(), Some(1), "{none:?}");
    assert!(
        none.stderr.contains("holds no results directory"),
        "{none:?}"
    );
}

/// `rubyrace watch DIR` on a pseudo-terminal: `script -q -e -c CMD /dev/null` runs it with
/// the pty as its terminal and copies what it draws to stdout.
fn watch_on_a_terminal(dir: &Path) -> std::process::Child {
    let command = format!(
        "stty cols 120 rows 40; exec {} watch {}",
        env!("CARGO_BIN_EXE_rubyrace"),
        dir.display()
    );
    Command::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .env("TERM", "xterm-256color")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("util-linux script")
}

fn finished_within(child: &mut std::process::Child, within: Duration) {
    let start = Instant::now();
    while start.elapsed() < within {
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("watch did not exit within {within:?}");
}

fn output(child: std::process::Child) -> (Option<i32>, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn on_a_terminal_watch_quits_on_q_and_exits_when_the_run_ends() {
    let lab = Lab::new("watch-tty");
    lab.experiment(&adaptive(3));
    let dir = lab.results();
    let run = lab.spawn_run(&[]);
    frames_until(&dir, Duration::from_secs(60), |f| f.contains("now: trial "));

    // `q` quits at once; the run goes on.
    let mut quitter = watch_on_a_terminal(&dir);
    std::thread::sleep(Duration::from_secs(3));
    quitter.stdin.as_mut().unwrap().write_all(b"q").unwrap();
    finished_within(&mut quitter, Duration::from_secs(5));
    let (code, drawn) = output(quitter);
    assert_eq!(code, Some(0), "{drawn}");
    assert!(drawn.contains("q quits"), "{drawn}");
    assert!(drawn.contains("rubyrace watch"), "{drawn}");

    // Left alone, it exits when the run ends, leaving the last frame as text.
    let mut follower = watch_on_a_terminal(&dir);
    let end = run.wait(Duration::from_secs(240));
    assert_eq!(end.code(), Some(0), "{end:?}");
    finished_within(&mut follower, Duration::from_secs(10));
    let (code, drawn) = output(follower);
    assert_eq!(code, Some(0), "{drawn}");
    assert!(drawn.contains("watched · complete · "), "{drawn}");
    lab.assert_no_leftovers(Duration::from_secs(5));
}

/// Frames of `watch --once` of a search or a gate, killed with SIGINT once `ready` is seen:
/// the last frame while it ran, and the frame after.
fn interrupted_when(
    running: crate::support::Running,
    dir: &Path,
    within: Duration,
    ready: impl Fn(&str) -> bool,
) -> (String, String, crate::support::Run) {
    let frames = frames_until(dir, within, ready);
    // SAFETY: the pid of the rubyrace this test started.
    assert_eq!(unsafe { libc::kill(running.pid() as i32, libc::SIGINT) }, 0);
    let end = running.wait(within + Duration::from_secs(120));
    (frames.last().unwrap().clone(), watch_once(dir), end)
}

/// (46.9, 46.10, 46.11) A bisection's round, watched from the bisection's directory:
/// which round, its commits, the blocks against the whole search's budget, where the
/// search stands; interrupted, the command that goes on is the bisection's, not `run
/// --resume` (which would measure outside the search). bisect's own progress says each
/// block's commits and its budget.
#[test]
fn watch_shows_a_bisections_search_and_its_resume_command() {
    let lab = Lab::new("watch-bisect");
    let work = crate::bisect::WORK;
    crate::bisect::history(&lab, |i| if i >= 13 { work * 2 } else { work }, |_| false);
    let out = lab.dir.path("search");
    let args = crate::bisect::bisect_args(&lab, &out, &["--max-blocks", "6"]);
    let running = crate::support::spawn(&args);
    let (frame, after, end) = interrupted_when(running, &out, Duration::from_secs(400), |f| {
        f.contains("  round 1 of the search: commits ") && f.contains("  blocks: 1 of at most 6")
    });
    let round = out.join("rounds").join("01");
    assert!(
        frame.starts_with(&format!("rubyrace watch · {}\n", round.display())),
        "{frame}"
    );
    for expected in [
        format!(
            "Bisection of 20 commits (main~19 .. main) on throughput (provisional): {}",
            out.display()
        ),
        "  round 1 of the search: commits 0, ".to_string(),
        ", 19 side by side".into(),
        "  blocks: 1 of at most 6 over the whole search (this round: 1)".into(),
    ] {
        assert!(frame.contains(&expected), "{expected:?} not in:\n{frame}");
    }
    assert_eq!(end.code(), Some(130), "{end:?}");
    assert!(after.contains(" · interrupted · "), "{after}");
    assert!(
        after.contains(&format!(
            "`rubyrace bisect --resume {}` goes on",
            out.display()
        )),
        "{after}"
    );
    assert!(!after.contains("rubyrace run --resume"), "{after}");
    // bisect's own words: each block's commits against the budget.
    assert!(
        end.stderr
            .contains("rubyrace: block 1 of at most 6: commits 0, "),
        "{end:?}"
    );
    lab.assert_no_leftovers(Duration::from_secs(5));
}

/// (46.9, 46.10, 46.11) A check's results directory, watched: the threshold, the looks, the
/// head's slowdown so far and the next look, the plan a minimum; interrupted, the command
/// that goes on is `check --resume DIR` (told by the stored gate).
#[test]
fn watch_shows_a_checks_gate_and_its_resume_command() {
    let lab = Lab::new("watch-check");
    let work = crate::bisect::WORK;
    crate::bisect::history(&lab, |i| if i >= 13 { work * 2 } else { work }, |_| false);
    let file = lab.experiment(
        "name = \"gate\"\n\n[settings]\napp = \"repo/app\"\nwarmup = \"300ms\"\nduration = \"1s\"\n",
    );
    let out = lab.dir.path("gate");
    let running = crate::support::spawn(&[
        "check",
        file.to_str().unwrap(),
        "--app-repo",
        lab.dir.path("repo").to_str().unwrap(),
        "--base",
        "main~19",
        "--head",
        "main",
        "--min-blocks",
        "4",
        "--max-blocks",
        "6",
        "-o",
        out.to_str().unwrap(),
    ]);
    let (frame, after, end) = interrupted_when(running, &out, Duration::from_secs(300), |f| {
        f.contains("blocks 1 done of ") && f.contains("time left: ")
    });
    for expected in [
        "blocks 1 done of at least 4 planned (its rule decides when it stops; its next look after 4 blocks) · trials 2 of at least 8 stored",
        "time left: at least ",
        "gate: the head may be at most 3% slower than the base on throughput (a slowdown factor up to 1.0300×) · looks after 4, 6 blocks",
        "gate after 1 block: ",
        " · its next look after 4 blocks",
    ] {
        assert!(frame.contains(expected), "{expected:?} not in:\n{frame}");
    }
    assert_eq!(end.code(), Some(130), "{end:?}");
    assert!(after.contains(" · interrupted · "), "{after}");
    assert!(
        after.contains(&format!(
            "`rubyrace check --resume {}` goes on",
            out.display()
        )),
        "{after}"
    );
    assert!(!after.contains("rubyrace run --resume"), "{after}");
    lab.assert_no_leftovers(Duration::from_secs(5));
}
