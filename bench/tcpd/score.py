#!/usr/bin/env python3
"""Scores change points on the Turing Change Point Detection benchmark (TCPD; van den Burg
and Williams 2020) with the benchmark's two metrics, as its analysis code defines them,
written anew here: F1 with a margin of 5 points over five annotators, and the covering
metric. Prints each series' scores and the averages beside those the benchmark published
for its default experiment (reference.json, transcribed from TCPDBench's v3
analysis/output/scores/default_{f1,cover}_scores.json) over the same series.

    score.py TCPD_DIR PREDICTIONS.json
"""
import json
import sys

MARGIN = 5


def matched(truth, predicted):
    """The points of `truth` with a prediction within MARGIN, each prediction used once,
    the nearest (then the earlier) first; truth in ascending order."""
    left = set(predicted)
    hits = set()
    for tau in sorted(truth):
        near = sorted((abs(tau - x), x) for x in left if abs(tau - x) <= MARGIN)
        if near:
            hits.add(tau)
            left.remove(near[0][1])
    return hits


def f1(annotations, predicted):
    """Precision over the union of the annotators' points, recall averaged over annotators,
    the start (0) counted in every set as the benchmark counts it."""
    per = [set(points) | {0} for points in annotations.values()]
    found = set(predicted) | {0}
    union = set().union(*per)
    precision = len(matched(union, found)) / len(found)
    recall = sum(len(matched(t, found)) / len(t) for t in per) / len(per)
    return 2 * precision * recall / (precision + recall)


def segments(points, n):
    starts = sorted({0} | {p for p in points if 0 < p < n})
    ends = starts[1:] + [n]
    return [set(range(a, b)) for a, b in zip(starts, ends)]


def cover(annotations, predicted, n):
    """The mean over annotators of how well the predicted segments cover theirs (each
    annotated segment's best Jaccard overlap, weighted by its length)."""
    mine = segments(predicted, n)
    total = 0.0
    for points in annotations.values():
        theirs = segments(points, n)
        total += sum(len(r) * max(len(r & q) / len(r | q) for q in mine) for r in theirs) / n
    return total / len(annotations)


def main():
    tcpd, predictions_file = sys.argv[1], sys.argv[2]
    annotations = json.load(open(f"{tcpd}/annotations.json"))
    predictions = json.load(open(predictions_file))
    reference = json.load(open(__file__.rsplit("/", 1)[0] + "/reference.json"))["datasets"]
    rows = []
    for name in sorted(predictions):
        if name.startswith("quality_control") or name == "uk_coal_employ" or name not in reference:
            continue
        n = json.load(open(f"{tcpd}/datasets/{name}/{name}.json"))["n_obs"]
        # The benchmark keeps predictions from 1 to n - 2.
        predicted = sorted({p for p in predictions[name] if 1 <= p <= n - 2})
        rows.append((name, f1(annotations[name], predicted), cover(annotations[name], predicted, n), len(predicted)))
    print(f"{'series':<24} {'F1':>6} {'cover':>6} {'found':>5}")
    for name, f, c, k in rows:
        print(f"{name:<24} {f:6.3f} {c:6.3f} {k:5d}")
    names = [r[0] for r in rows]
    print(f"\n{len(rows)} univariate series (the benchmark's, without quality_control_* and uk_coal_employ, that the checkout holds)")
    print(f"{'detector':<34} {'F1':>6} {'cover':>6}")
    print(f"{'rubyrace (stats::changepoint)':<34} {sum(r[1] for r in rows) / len(rows):6.3f} {sum(r[2] for r in rows) / len(rows):6.3f}")
    for method in ["ecp", "binseg", "pelt", "bocpd", "zero"]:
        fs = [reference[d][method]["f1"] or 0.0 for d in names]
        cs = [reference[d][method]["cover"] or 0.0 for d in names]
        label = {"ecp": "ecp (E-divisive), published", "zero": "zero (no change), published"}.get(method, f"{method}, published")
        print(f"{label:<34} {sum(fs) / len(fs):6.3f} {sum(cs) / len(cs):6.3f}")


if __name__ == "__main__":
    main()
