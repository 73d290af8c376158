#!/usr/bin/env bash
# The whole test suite from a clean clone: installs what it needs (Python packages from PyPI,
# Debian's docker.io and debootstrap, a local test image), then runs these (the checks up to
# engine in two lanes, beside them molecule and e2e in lanes of their own, e2e first on the CPU;
# see `lanes` below):
#   lint      ansible-lint, production profile
#   sanity    ansible-test sanity on a copy laid out as ansible_collections/gb10/serving
#   publish   the built tarball as Galaxy would take it: no leftovers shipped, galaxy-importer
#             passes with no warning (no containers), ansible-core range agrees, and
#             ansible-builder create makes the execution environment's build context
#   unit      pytest tests/unit (modules, module_utils, filters, callback)
#   engine    rendered engine command lines against the real vLLM argument parser (.venv-engine)
#   molecule  every scenario under molecule/ that runs on its own test hosts
#   e2e       pytest tests/e2e on the simulated cluster, modules in their numbered order: the
#             2-Spark cluster (deploy TP=2, re-run, drift, recover, exposure, faults, watchdog),
#             then teardown
# Slower, not in the default run (the budget: 45 minutes on 2 cores where the images are built, 75 where they are not, CI's hard limit 90):
#   molecule-sim  (after the lanes) the scenarios that need the simulation: its cluster (serving_containers, vllm_serve, watchdog; the
#                 e2e stage runs the same roles on the same cluster through deploy-m27.yml) or its
#                 serving image (link_check: both ranks on this machine's Docker)
#   core-next     (after the lanes) the newest supported ansible-core under Python 3.12: unit, sanity, the
#                 firewall scenario and the deploy on the simulated cluster (test_1, test_2)
#   e2e cases marked `full` (pytest.ini): link and registry faults that a role run alone shows,
#                 vLLM's own executor on the 2-Spark cluster (test_4c_executor_mp.py: about 220 s
#                 for its first two cases alone), the 3-Spark cluster (deploy TP=3,
#                 test_5_deploy_tp3.py: about 600 s), the reset (test_4d_reset.py), and the upgrade
#                 that serves with the rollback on request (test_2c_upgrade.py: about 370 s)
# Usage: scripts/test.sh [stage ...]   (default: lint sanity publish unit engine molecule e2e; `full`:
# all stages and every e2e case). Each stage's time and the e2e tests' times are printed at the end.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# The whole machine's busy CPU time over the run (/proc/stat: user, nice, system, irq, softirq),
# printed at the end beside the wall time: a run cannot end sooner than that work over the cores,
# however its stages overlap.
cpu_busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
cpu_busy_start=$(cpu_busy_ticks)
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(lint sanity publish unit engine molecule e2e)
e2e_filter=(-m "not full")
if [ "${stages[*]}" = full ]; then
  stages=(lint sanity publish unit engine molecule molecule-sim core-next e2e)
  e2e_filter=()
fi
# Scenarios that need the simulation (tests/sim): its cluster as their hosts, or its 4 GB serving
# image (link_check), not test hosts of their own.
sim_scenarios=(serving_containers vllm_serve watchdog link_check)

scripts/setup.sh
export PATH="$top/.venv/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$top/.collections"
export ANSIBLE_FORCE_COLOR=0 PY_COLORS=0

needs_docker=0
for s in "${stages[@]}"; do case "$s" in molecule*|e2e*|core-next) needs_docker=1 ;; esac; done
sim_images_pid=
if [ "$needs_docker" = 1 ]; then
  scripts/host-deps.sh
  GB10_TEST_IMAGE=$(tests/images/build_base.sh)
  export GB10_TEST_IMAGE
  # The real Triton molecule/triton_ptxas asks which assembler it runs (H7); cached after the first run.
  GB10_TRITON_SITE=$(tests/images/triton_site.sh)
  export GB10_TRITON_SITE
  # The simulation's images and model (tests/sim/README.md) build while the stages before e2e
  # (molecule-sim, core-next's deploy) run: on a machine that never built them that is ten minutes or more, mostly downloads and
  # image layers, which overlap the checks; where they are built it takes seconds.
  if [[ " ${stages[*]} " == *" e2e "* || " ${stages[*]} " == *" molecule-sim "* || " ${stages[*]} " == *" core-next "* ]]; then
    mkdir -p tests/output
    rm -f tests/output/sim-images.rc
    (rc=0; .venv/bin/python tests/sim/cluster.py images >tests/output/sim-images.log 2>&1 || rc=$?
     echo "$rc" >tests/output/sim-images.rc) &
    sim_images_pid=$!
  fi
fi

# The e2e lane is a subshell, and `wait` waits only for a shell's own children: the build writes
# its exit status to a file, read once it is there or the job is gone (bounded by the build itself).
wait_sim_images() {
  [ -n "$sim_images_pid" ] || return 0
  local started=$SECONDS
  while [ ! -s tests/output/sim-images.rc ] && kill -0 "$sim_images_pid" 2>/dev/null; do sleep 2; done
  if [ "$(cat tests/output/sim-images.rc 2>/dev/null)" != 0 ]; then
    echo "the simulation's images did not build; end of tests/output/sim-images.log:"; tail -n 60 tests/output/sim-images.log
    return 1
  fi
  sim_images_pid=
  echo "##### the simulation's images: ready after waiting $((SECONDS - started)) s (tests/output/sim-images.log)"
}

run_lint() { ansible-lint --profile production; }

run_sanity() {
  # ansible-test bootstraps pip in its sanity venvs with a get-pip.py from
  # ci-files.testing.ansible.com, which is unreachable here: put our offline stand-in where
  # ansible-test caches that download (tests/sanity/get_pip_offline.py says how it works).
  local pip_version
  pip_version=$(python - <<'PY'
import re, ansible_test, os
src = open(os.path.join(os.path.dirname(ansible_test.__file__), '_internal', 'python_requirements.py')).read()
print(re.search(r"pip='([0-9.]+)'", src).group(1))
PY
)
  mkdir -p ~/.ansible/test/cache
  cp tests/sanity/get_pip_offline.py ~/.ansible/test/cache/get_pip_"${pip_version//./_}".py
  # ansible-test needs the collection at .../ansible_collections/<namespace>/<name>; copy the
  # files git knows about (a symlink would resolve back to the checkout).
  # A folder of this run's own: two checkouts testing on one machine must not share one.
  local root dest rc=0
  root=$(mktemp -d /tmp/gb10-sanity.XXXXXX)
  dest=$root/ansible_collections/gb10/serving
  mkdir -p "$dest"
  git ls-files -z | tar --null -T - -cf - | tar -C "$dest" -xf -
  # The Python of the ansible-test that runs (the default lanes' 3.11, core-next's 3.12).
  local python_version
  python_version=$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  (cd "$dest" && git init -q && git add -A && ansible-test sanity --venv --python "$python_version" --requirements --color no) || rc=$?
  rm -rf "$root"
  return "$rc"
}

# tests/publish builds the tarball from a copy of the checkout (with a test run's leftovers
# planted) and runs galaxy-importer and ansible-builder on it; see tests/publish/test_publish.py.
run_publish() { python -m pytest -q tests/publish; }

run_unit() { python -m pytest -q tests/unit; }

run_engine() {
  if [ -d tests/engine ]; then
    scripts/engine-venv.sh
    .venv-engine/bin/python -m pytest -q tests/engine
  fi
}

# The longest scenarios (measured: 4-10 minutes each under 3 jobs, the rest 1-4) start first, so
# that the stage does not end on one of them running alone.
molecule_longest=(preflight serving_image cluster_link leak_recovery)

run_molecule() {
  local scenario scenarios=("${molecule_longest[@]}")
  for scenario in molecule/*/; do
    scenario=$(basename "$scenario")
    [[ " ${sim_scenarios[*]} ${molecule_longest[*]} " == *" $scenario "* ]] || scenarios+=("$scenario")
  done
  # GB10_MOLECULE_JOBS scenarios at a time (default 3, 1 beside e2e): a scenario mostly waits on
  # docker exec round trips, and each has its own hosts and network. Beside e2e one at a time
  # still ends well before e2e (three at a time ended at 1292 s of e2e's 2534 on 2026-12-05), and
  # the Docker engine's own work for them (docker exec, not reached by nice or the CPU weight)
  # slowed e2e's first deploy to twice its time. Each one's output goes to
  # tests/output/molecule/<scenario>.log; a failure prints its end and stops the stage.
  mkdir -p tests/output/molecule
  printf '%s\n' "${scenarios[@]}" | xargs -P "${GB10_MOLECULE_JOBS:-3}" -I{} bash -c '
    log=tests/output/molecule/$1.log; start=$SECONDS
    if molecule test -s "$1" >"$log" 2>&1; then
      echo "=== molecule test -s $1 passed in $((SECONDS - start)) s"
    else
      echo "=== molecule test -s $1 FAILED after $((SECONDS - start)) s; end of $log:"; tail -n 200 "$log"
      exit 255
    fi' _ {}
}

# The newest ansible-core the collection supports (meta/runtime.yml: 2.20, which needs Python 3.12,
# what a DGX OS 7 controller installs), in a virtualenv of its own from
# tests/requirements-core-next.txt, the collection linked as the default lanes link it: the unit
# suite, sanity, one molecule scenario (firewall: nftables, a boot unit, community.general) and the
# e2e deploy on the simulated cluster. In `full` only, after the lanes.
run_core-next() {
  local py cache key venv
  # The first Python 3.12 that runs: on the PATH, or a pyenv version that is not the global one.
  py=
  for candidate in python3.12 "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/3.12*/bin/python3.12; do
    if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then py=$candidate; break; fi
  done
  [ -n "$py" ] || { echo "core-next: no Python 3.12 runs here (on the PATH or under pyenv's versions); install one"; return 1; }
  cache=${GB10_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gb10-serving/venvs}
  key=$( { cat tests/requirements-core-next.txt; "$py" -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-12)
  venv=$cache/core-next-$key
  if [ ! -f "$venv/.gb10-complete" ]; then
    rm -rf "$venv"
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q -r tests/requirements-core-next.txt
    touch "$venv/.gb10-complete"
  fi
  "$venv/bin/python" -c 'import sys, ansible.release as r; print("ansible-core", r.__version__, "on Python", sys.version.split()[0])'
  PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest -q tests/unit
  PATH="$venv/bin:$PATH" run_sanity
  PATH="$venv/bin:$PATH" "$venv/bin/molecule" test -s firewall
  # The deploy on the simulated cluster, as the default run's first modules make it (the e2e stage
  # after this one starts from a fresh cluster).
  wait_sim_images
  PATH="$venv/bin:$PATH" "$venv/bin/python" -m pytest -q -x --durations=0 --durations-min=5 -m "not full" \
    tests/e2e/test_1_sim_cluster.py tests/e2e/test_2_deploy.py
}

run_molecule-sim() {
  local scenario
  wait_sim_images
  for scenario in "${sim_scenarios[@]}"; do
    echo "=== molecule test -s $scenario"
    molecule test -s "$scenario"
  done
}

# Every e2e test's time (setup, call, teardown) over 5 s is listed at the end, and every test's
# time is kept in tests/output/e2e-durations.xml (JUnit): the budget's split (default run or `full`)
# is decided on those figures.
run_e2e() {
  wait_sim_images
  python -m pytest -q -x --durations=0 --durations-min=5 --junitxml=tests/output/e2e-durations.xml \
    "${e2e_filter[@]}" tests/e2e
}

# The checks before the Docker stages are single-threaded Python: two lanes of them run side by
# side on a 2-core machine (each stage's output in tests/output/stages/<stage>.log, printed when it
# ends), and molecule and e2e, when asked for with them, in lanes of their own beside them. Any
# other stage runs alone, in order, after the lanes.
# Measured on an idle 2-core machine that ran them before: lint 161 s, unit 121, sanity 136,
# publish 20, engine 25 (300 more where its venv is not cached yet, scripts/engine-venv.sh).
# Molecule beside the checks (2026-12-04, the same 2-core machine, both cached): the checks 304 s
# and molecule 877 s side by side, against 270 s and then 817 s one after the other: 210 s less.
# e2e is the longest stage and about 40 % idle (engine start-ups, the watchdog's deadlines, the
# controller between tasks), so it runs beside them too, ahead of them on the CPU: the other lanes
# at nice 19, and molecule's test hosts with a CPU weight of 2 against Docker's default 1024 for the
# simulated Sparks (GB10_MOLECULE_CPU_SHARES, tests/molecule/create.yml), since nice does not reach
# the work inside containers. Tried without that weight (2026-11-27, molecule at nice 10), the first
# deploy's plays took 2.5-4x as long and the simulated link's all-reduce fell under its floor (1.3
# Gb/s against 1.5); with it (2026-12-05) the deploy took 1.37x as long beside the whole molecule
# stage and the link measured 5.0 Gb/s, and the whole run took 2493 s on a clean clone against
# 2642 s with e2e after the others (BENCHMARKS.md).
lanes=("lint unit" "sanity publish engine")
[[ " ${stages[*]} " == *" molecule "* ]] && lanes+=("molecule")
[[ " ${stages[*]} " == *" e2e "* ]] && lanes+=("e2e")
stage_log=tests/output/stages
mkdir -p "$stage_log"
times=()

run_stage() {
  local s=$1 started=$SECONDS
  echo "##### stage: $s"
  "run_$s"
  # Per-stage wall time: the budget is 45 minutes on 2 cores where the images are built (CI's hard limit 90).
  echo "##### stage $s passed in $((SECONDS - started)) s"
}

run_lane() {
  local s rc
  if [[ " ${lanes[*]} " == *" e2e "* && "$1" != e2e ]]; then
    renice -n 19 -p "$BASHPID" >/dev/null
    export GB10_MOLECULE_CPU_SHARES=2 GB10_MOLECULE_JOBS=${GB10_MOLECULE_JOBS:-1}
  fi
  for s in "$@"; do
    rc=0
    # A job of its own, not `run_stage || ...`: a function called in a test ignores set -e.
    run_stage "$s" >"$stage_log/$s.log" 2>&1 &
    wait $! || rc=$?
    cat "$stage_log/$s.log"
    [ "$rc" = 0 ] || { echo "##### stage $s FAILED (exit $rc)"; return 1; }
  done
}

# Every process under the given ones, each stopped (SIGSTOP) as it is found so that none forks
# another meanwhile, then ended (SIGTERM, then SIGCONT to deliver it). Containers the stages made
# (molecule's test hosts, the simulated cluster) stay, as after any failed run: the next run's
# create steps replace them.
freeze_tree() {
  local child
  kill -STOP "$1" 2>/dev/null || return 0
  echo "$1"
  for child in $(pgrep -P "$1"); do freeze_tree "$child"; done
}

stop_trees() {
  local pid procs=()
  for pid in "$@"; do
    mapfile -t -O "${#procs[@]}" procs < <(freeze_tree "$pid")
  done
  [ ${#procs[@]} = 0 ] && return 0
  kill -TERM "${procs[@]}" 2>/dev/null || true
  kill -CONT "${procs[@]}" 2>/dev/null || true
}

requested=" ${stages[*]} "
laned=1
for lane in "${lanes[@]}"; do
  for s in $lane; do [[ "$requested" == *" $s "* ]] || laned=0; done
done
rest=("${stages[@]}")
if [ "$laned" = 1 ]; then
  started=$SECONDS
  pids=()
  for lane in "${lanes[@]}"; do
    # shellcheck disable=SC2086
    run_lane $lane &
    pids+=($!)
  done
  # The first lane that fails stops the others (their stages so far are in $stage_log): a failed run
  # does not land, so it should not spend the longest lane's time finding that out (`wait -n -p`: bash 5.1+).
  running=("${pids[@]}")
  while [ ${#running[@]} -gt 0 ]; do
    rc=0
    wait -n -p ended "${running[@]}" || rc=$?
    left=()
    for pid in "${running[@]}"; do [ "$pid" = "$ended" ] || left+=("$pid"); done
    running=("${left[@]}")
    if [ "$rc" != 0 ]; then
      [ ${#running[@]} = 0 ] || echo "##### a lane failed: stopping the others (their output so far: $stage_log/)"
      # The images' build too, while it has not written its status (after that its pid may be another's).
      images=()
      [ -z "$sim_images_pid" ] || [ -s tests/output/sim-images.rc ] || images=("$sim_images_pid")
      stop_trees "${running[@]}" "${images[@]}"
      wait "${running[@]}" 2>/dev/null || true
      exit 1
    fi
  done
  for lane in "${lanes[@]}"; do
    for s in $lane; do
      times+=("$s $(sed -n "s/^##### stage $s passed in \([0-9]*\) s$/\1/p" "$stage_log/$s.log") (in a lane)")
    done
  done
  times+=("(the lanes $((SECONDS - started)))")
  rest=()
  for s in "${stages[@]}"; do
    [[ " ${lanes[*]} " == *" $s "* ]] || rest+=("$s")
  done
fi

for s in "${rest[@]}"; do
  started=$SECONDS
  run_stage "$s"
  times+=("$s $((SECONDS - started))")
done
echo "##### stage times (s):"
printf '#####   %s\n' "${times[@]}"
cpu_busy=$((($(cpu_busy_ticks) - cpu_busy_start) / $(getconf CLK_TCK)))
echo "##### CPU: $cpu_busy core-seconds busy in $SECONDS s on $(nproc) cores (at least $((cpu_busy / $(nproc))) s of wall time)"
echo "##### all stages passed in $SECONDS s: ${stages[*]}"
