//! A load run's outcome as data that crosses a pipe: a fleet's load agent runs the load on
//! another host and sends the `RunOutcome` back as JSON (docs/fleet.md, "A separate load
//! host"). `RunOutcome` and its parts derive serde with these helpers:
//! - `histogram`: an HDR histogram in its V2 encoding (HdrHistogram's own interchange
//!   format, lossless), as a byte array;
//! - `status_counts`: the 1000 status slots as the (code, count) pairs that are not zero;
//! - `io_error`: an `io::Error` as its message (the kind is not kept).

/// `Histogram<u64>` through HdrHistogram's V2 serialization.
pub mod histogram {
    use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
    use hdrhistogram::Histogram;
    use serde::{Deserialize, Serialize};

    pub fn encode(h: &Histogram<u64>) -> Vec<u8> {
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(h, &mut bytes)
            .expect("a histogram serializes into memory");
        bytes
    }

    pub fn decode(bytes: &[u8]) -> Result<Histogram<u64>, String> {
        let mut h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut &bytes[..])
            .map_err(|e| format!("not a V2 histogram: {e:?}"))?;
        // As `stats::new_latency_histogram`: a later merge may hold larger values.
        h.auto(true);
        Ok(h)
    }

    pub fn serialize<S: serde::Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        encode(h).serialize(s)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let bytes = Vec::<u8>::deserialize(d)?;
        decode(&bytes).map_err(serde::de::Error::custom)
    }

    /// The same for an optional histogram.
    pub mod option {
        use super::*;

        pub fn serialize<S: serde::Serializer>(
            h: &Option<Histogram<u64>>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            h.as_ref().map(encode).serialize(s)
        }

        pub fn deserialize<'de, D: serde::Deserializer<'de>>(
            d: D,
        ) -> Result<Option<Histogram<u64>>, D::Error> {
            Option::<Vec<u8>>::deserialize(d)?
                .map(|b| decode(&b).map_err(serde::de::Error::custom))
                .transpose()
        }
    }
}

/// The status slots (`stats::STATUS_SLOTS` of them) as their non-zero (code, count) pairs.
pub mod status_counts {
    use serde::{Deserialize, Serialize};

    pub fn serialize<S: serde::Serializer, const N: usize>(
        slots: &[u64; N],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let pairs: Vec<(usize, u64)> = slots
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(code, &n)| (code, n))
            .collect();
        pairs.serialize(s)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>, const N: usize>(
        d: D,
    ) -> Result<Box<[u64; N]>, D::Error> {
        let mut slots = Box::new([0u64; N]);
        for (code, n) in Vec::<(usize, u64)>::deserialize(d)? {
            *slots.get_mut(code).ok_or_else(|| {
                serde::de::Error::custom(format!("status {code} is out of range"))
            })? = n;
        }
        Ok(slots)
    }
}

/// An optional `io::Error` as its message.
pub mod io_error {
    use serde::{Deserialize, Serialize};
    use std::io;

    pub fn serialize<S: serde::Serializer>(e: &Option<io::Error>, s: S) -> Result<S::Ok, S::Error> {
        e.as_ref().map(|e| e.to_string()).serialize(s)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<io::Error>, D::Error> {
        Ok(Option::<String>::deserialize(d)?.map(io::Error::other))
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::RunOutcome;
    use crate::stats::{ErrorKind, StepStats, ThreadStats};
    use std::time::Duration;

    /// An outcome with every kind of field filled, as a run against a real server leaves.
    fn outcome() -> RunOutcome {
        let mut stats = ThreadStats::new(true);
        for v in [120u64, 950, 4_000, 4_100, 250_000, 3_000_000_000] {
            stats.latency.record(v).unwrap();
        }
        stats
            .latency_uncorrected
            .as_mut()
            .unwrap()
            .record(800)
            .unwrap();
        stats.responses = 6;
        stats.status[200] = 5;
        stats.status[503] = 1;
        stats.count_error(ErrorKind::Timeout, 2);
        stats.bytes_read = 12_345;
        stats.recording_started_ns = 300_000_000;
        stats.recording_ended_ns = 1_300_000_000;
        let mut step = StepStats::new();
        step.latency.record(777).unwrap();
        step.first_failures.push("GET /x: status 500".into());
        stats.steps.push(step);
        stats.first_tls_error = Some("certificate unknown".into());
        RunOutcome {
            stats,
            connections_per_thread: vec![3, 2],
            recorded: Duration::from_millis(1000),
            interrupted: false,
            raw_error: Some(std::io::Error::other("disk full")),
            peak_open: crate::engine::OpenPeak {
                open: 5,
                connecting: 1,
                answered: 4,
                per_thread: vec![3, 2],
                exact: false,
            },
            time_wait: Some(crate::TimeWait {
                local_ports: 7,
                at_target: 0,
                local_port_range: Some((32768, 60999)),
            }),
        }
    }

    #[test]
    fn an_outcome_crosses_json_unchanged() {
        let sent = outcome();
        let text = serde_json::to_string(&sent).unwrap();
        let got: RunOutcome = serde_json::from_str(&text).unwrap();
        assert_eq!(got.stats.latency, sent.stats.latency);
        assert_eq!(got.stats.latency.max(), sent.stats.latency.max());
        assert_eq!(
            got.stats.latency.value_at_quantile(0.5),
            sent.stats.latency.value_at_quantile(0.5)
        );
        assert_eq!(
            got.stats.latency_uncorrected,
            sent.stats.latency_uncorrected
        );
        assert_eq!(got.stats.status[..], sent.stats.status[..]);
        assert_eq!(got.stats.errors, sent.stats.errors);
        assert_eq!(got.stats.bytes_read, 12_345);
        assert_eq!(got.stats.recording_ended_ns, 1_300_000_000);
        assert_eq!(got.stats.steps[0].latency, sent.stats.steps[0].latency);
        assert_eq!(got.stats.steps[0].first_failures, ["GET /x: status 500"]);
        assert_eq!(
            got.stats.first_tls_error.as_deref(),
            Some("certificate unknown")
        );
        assert_eq!(got.connections_per_thread, [3, 2]);
        assert_eq!(got.recorded, Duration::from_millis(1000));
        assert_eq!(got.raw_error.unwrap().to_string(), "disk full");
        assert_eq!(got.peak_open, sent.peak_open);
        assert_eq!(got.time_wait, sent.time_wait);
        // Only the non-zero status slots travel.
        assert!(text.contains("[[200,5],[503,1]]"), "{text}");
    }

    #[test]
    fn a_decoded_histogram_still_grows() {
        let mut h = super::histogram::decode(&super::histogram::encode(
            &crate::stats::new_latency_histogram(),
        ))
        .unwrap();
        h.record(120_000_000_000).unwrap();
        assert_eq!(h.len(), 1);
        assert!(super::histogram::decode(b"not a histogram").is_err());
        assert!(serde_json::from_str::<RunOutcome>("{}").is_err());
    }
}
