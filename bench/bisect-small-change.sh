#!/usr/bin/env bash
# Real bisections of a small change (issue 48): a Rack app committed 16 times (or N), one
# commit doing 3% more work per request (about 2.6% more cost once Puma's own share is
# counted), two commits that raise at boot; `rubyrace bisect` run REPEATS times on it.
# Prints each search's answer, blocks and minutes; the searches' directories stay in
# WORKDIR. Usage: bench/bisect-small-change.sh [COMMITS] [CHANGE_AT] [REPEATS] [WORKDIR]
set -euo pipefail
commits=${1:-16}
change_at=${2:-11}
repeats=${3:-3}
work=${4:-$(mktemp -d /tmp/bisect-small.XXXXXX)}
here=$(cd "$(dirname "$0")/.." && pwd)
rubyrace=${RUBYRACE:-$here/target/release/rubyrace}
repo=$work/repo
mkdir -p "$repo/app"
git -C "$repo" init --quiet --initial-branch=main
for ((i = 0; i < commits; i++)); do
  w=150000
  if ((i >= change_at)); then w=154500; fi
  boot=""
  # Two commits that do not boot (each fixed by the next).
  if ((i == change_at - 3 || i == change_at + 2)); then boot="raise \"commit $i does not boot\""; fi
  printf '%s\nWORK = %d\nrun ->(env) { x = 0; WORK.times { |i| x += i }; [200, { "content-type" => "text/plain" }, [x.to_s]] }\n' "$boot" "$w" > "$repo/app/config.ru"
  echo "change $i" > "$repo/app/CHANGES"
  git -C "$repo" add .
  git -C "$repo" -c user.name=bench -c user.email=bench@localhost commit --quiet -m "commit $i"
done
cat > "$work/exp.toml" <<TOML
name = "small-change"

[settings]
app = "repo/app"
warmup = "300ms"
duration = "1s"
TOML
echo "history: $commits commits in $repo, 3% more work from commit $change_at, commits $((change_at - 3)) and $((change_at + 2)) do not boot"
for ((r = 1; r <= repeats; r++)); do
  out=$work/search-$r
  start=$(date +%s)
  set +e
  "$rubyrace" bisect "$work/exp.toml" --app-repo "$repo" --good "main~$((commits - 1))" --bad main -o "$out" > "$out.md" 2> "$out.log"
  code=$?
  set -e
  end=$(date +%s)
  answer=$(python3 -c "import json,sys; r=json.load(open('$out/bisect.json')); print(json.dumps(r['outcome']), 'metric', r['metric'], 'blocks', sum(x['blocks'] for x in r['rounds']), 'rounds', len(r['rounds']))")
  echo "search $r: exit $code, $(( (end - start) / 60 ))m$(( (end - start) % 60 ))s, $answer"
done
