//! The change-point detector on the Turing Change Point Detection benchmark's series (van
//! den Burg & Williams 2020), for `bench/tcpd/run` (docs/history.md): every univariate
//! series of a TCPD checkout without missing values, z-scored as the benchmark does, each
//! point with no error of its own (so the test weighs the points equally and estimates
//! their scatter), and the change points written as JSON for the scorer. Ignored by default:
//! it needs the data (`TCPD_DIR`), which is not redistributed here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use stats::changepoint::{change_points, Point, Settings};

#[test]
#[ignore = "needs a TCPD checkout in TCPD_DIR; run by bench/tcpd/run"]
fn tcpd_predictions() {
    let dir = PathBuf::from(std::env::var("TCPD_DIR").expect("TCPD_DIR: a TCPD checkout"));
    let out = PathBuf::from(std::env::var("TCPD_OUT").expect("TCPD_OUT: the JSON to write"));
    // The detector's settings, its defaults unless TCPD_MAX_P or TCPD_MIN_SEGMENT say.
    let mut settings = Settings::default();
    if let Ok(p) = std::env::var("TCPD_MAX_P") {
        settings.max_p = p.parse().expect("TCPD_MAX_P: a number");
    }
    if let Ok(d) = std::env::var("TCPD_DEPENDENCE") {
        settings.dependence = d == "1";
    }
    if let Ok(m) = std::env::var("TCPD_MIN_SEGMENT") {
        settings.min_segment = m.parse().expect("TCPD_MIN_SEGMENT: a whole number");
    }
    let mut predictions: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for entry in std::fs::read_dir(dir.join("datasets")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let file = dir
            .join("datasets")
            .join(&name)
            .join(format!("{name}.json"));
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue; // a series the checkout has to download
        };
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        if doc["n_dim"] != 1 {
            continue;
        }
        let raw: Option<Vec<f64>> = doc["series"][0]["raw"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64())
            .collect();
        let Some(raw) = raw else {
            continue; // missing values
        };
        let n = raw.len() as f64;
        let mean = raw.iter().sum::<f64>() / n;
        let sd = (raw.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let points: Vec<Point> = raw
            .iter()
            .map(|v| Point {
                value: if sd > 0.0 { (v - mean) / sd } else { 0.0 },
                se: 0.0,
            })
            .collect();
        let found = change_points(&points, &settings);
        predictions.insert(name, found.iter().map(|c| c.index).collect());
    }
    assert!(!predictions.is_empty(), "no series under {}", dir.display());
    std::fs::write(&out, serde_json::to_string_pretty(&predictions).unwrap()).unwrap();
}
