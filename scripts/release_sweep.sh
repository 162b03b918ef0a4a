#!/usr/bin/env bash
# One session of the dataset release sweep (issue 18; docs/dataset.md, docs/measure.md).
#
#   bash scripts/release_sweep.sh [BUDGET_SECONDS] [hydra overrides...]
#   POINTS="tflite-cpu-1large-int8 tflite-cpu-2large-fp32" bash scripts/release_sweep.sh 3000 'measure.sources=[synthetic]'
#
# Composes the release configuration into data/release.params.yaml (data_dir data/release,
# never the main job's params.yaml), generates what is missing, prunes the artifacts whose pairs
# have all landed and exports what is missing, measures the
# control set (the between-session drift), then the release's measure points one after another
# until the budget is spent (default 5400 s; a point interrupted by the budget resumes next
# time, finished processes kept), and finally assembles and writes the release
# (datasets/host-<processor>-v<N>: the release of this machine's processor, committed by hand).
# Pairs the release already holds are not measured again, so the next session, here or on
# another machine of the same processor, goes on where this one stopped.
#
# Run it on a quiet machine: nothing else heavy beside it (the load check refuses what it sees,
# and what it refuses is measured again by the next session).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"

budget=${1:-5400}
shift || true
params=data/release.params.yaml
start=$(date +%s)
say() { printf '%s release-sweep: %s\n' "$(date -u +%H:%M:%S)" "$*"; }

compose() {
  python -m pipelines.cli compose scenario=release measure=release release=sweep \
    'generator=[synthetic,zoo,nasbench201,pytorch,transformer,release]' data_dir=data/release "$@" -o "$params"
}
mkdir -p data
# a release holds one processor's measurements: this machine adds to the release measured on its
# processor (a new datasets/host-<processor>-v1 on one the project has not seen); an explicit
# release.folder=... among the overrides wins, and is checked
compose "$@"
release=$(python -m pipelines.release_writer --params "$params" --for-this-machine)
compose "release.folder=$release" "$@"
python -m pipelines.release_writer --params "$params" --check-machine
release=$(python -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['release']['folder'])" "$params")
say "this machine ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs)) adds to $release"
python -m pipelines.cli generate --params "$params" --quiet
# the disk first: files whose pairs the release holds at every point reading them are deleted
# (pipelines/prune.py), and export does not write them again; files pruned earlier that a point
# added since still reads (the GPU point's NAS-Bench-201 files) are forgotten as pruned first, so
# export writes them again
python -m pipelines.cli prune --params "$params" --restore
python -m pipelines.cli prune --params "$params"
python -m pipelines.cli export --params "$params"
say "export done after $(( $(date +%s) - start )) s; the control set"
python -m pipelines.control --params "$params" --quiet

# the points in the order the release needs them: fp32 one core (e2e, op, kernel) on every
# network first, then the GPU's 100 NAS-Bench-201 cells (one session's work, so it does not wait
# behind the long points), int8, then the synthetic networks on two cores and on PyTorch ($POINTS:
# other points or another order; a point is named as DVC's matrix names its stage). A point
# measures its pairs in blocks of measure.chunk, so the budget ends between blocks of whole pairs,
# which land in the release.
for point in ${POINTS:-tflite-cpu-1large-fp32 tflite-gpu-fp32 tflite-cpu-1large-int8 tflite-cpu-2large-fp32 pytorch-cpu-1large-fp32}; do
  left=$(( budget - ($(date +%s) - start) ))
  if (( left <= 60 )); then
    say "budget spent: $point and the points after it wait for the next session"
    break
  fi
  # <framework>-cpu-<cores>-<precision> on the CPU, <framework>-gpu-<precision> on the GPU
  IFS=- read -r framework accelerator third fourth <<< "$point"
  if [[ $accelerator == cpu ]]; then
    where=(--cores "$third" --precision "$fourth")
  else
    where=(--accelerator "$accelerator" --precision "$third")
  fi
  say "$point (at most $left s)"
  rc=0
  timeout --signal=INT --kill-after=60 "$left" \
    python -m pipelines.cli measure --params "$params" --framework "$framework" "${where[@]}" || rc=$?
  if (( rc == 124 )); then
    say "$point stopped by the budget (it resumes next session)"
    break
  elif (( rc != 0 )); then
    say "$point failed (exit $rc); the release is written from what landed"
    break
  fi
done

python -m pipelines.cli assemble --params "$params"
python -m pipelines.release_writer --params "$params"
say "done after $(( $(date +%s) - start )) s: retrain the host entries on the grown release"
say "  (leaderboard-train predictor=all track=host out=leaderboard/entries/host; docs/leaderboard.md),"
say "  then commit datasets/ and leaderboard/entries/host together"
