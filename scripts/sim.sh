#!/usr/bin/env bash
# The simulated DGX Spark cluster on this machine (tests/sim/README.md): no hardware needed.
#   scripts/sim.sh deploy [m27|m3] [ansible-playbook args...]
#        set up (scripts/setup.sh, Docker), create the simulated hosts when absent, then run
#        playbooks/deploy-m27.yml on inventory/sim.ini (2 hosts, TP=2; the default) or
#        playbooks/deploy-m3.yml on inventory/sim3.ini (3 hosts, TP=3)
#   scripts/sim.sh up [2|3] [--fresh]   create/update the hosts (--fresh: recreate them, clean)
#   scripts/sim.sh down [--keep-cache]  remove everything the simulation created (by label)
#   scripts/sim.sh status               list the simulated hosts
# First run on a machine that never ran it: about 10 minutes on 2 cores to the chat answer, 5 of
# them building the images and the tiny model (BENCHMARKS.md, `python -m bench newcomer`); later
# runs reuse them (cached by content hash).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

prepare() {
  scripts/setup.sh
  scripts/host-deps.sh
  export PATH="$top/.venv/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$top/.collections" ANSIBLE_CONFIG="$top/ansible.cfg"
}

cluster() { "$top/.venv/bin/python" "$top/tests/sim/cluster.py" "$@"; }

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  deploy)
    which=${1:-m27}
    [ $# -gt 0 ] && shift
    case "$which" in
      m27) hosts=2 inventory=inventory/sim.ini playbook=playbooks/deploy-m27.yml ;;
      m3) hosts=3 inventory=inventory/sim3.ini playbook=playbooks/deploy-m3.yml ;;
      *) echo "sim.sh: deploy takes m27 (2 hosts, TP=2) or m3 (3 hosts, TP=3), not '$which'" >&2; exit 2 ;;
    esac
    prepare
    cluster up "$hosts"
    # The watchdog on, as a Spark's deploy has it (the inventory turns it off for the e2e fault
    # cases, which run playbooks without this script); a later -e gb10_watchdog=false wins.
    exec ansible-playbook "$playbook" -i "$inventory" -e gb10_watchdog=true "$@"
    ;;
  up)
    prepare
    cluster up "$@"
    ;;
  down | status)
    [ -x .venv/bin/python ] || scripts/setup.sh
    cluster "$cmd" "$@"
    ;;
  *) usage ;;
esac
