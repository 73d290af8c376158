# The engine's one control script, run in the Ray head container with `sh -c` by the
# role's tasks (probe.yml: status; engine.yml: wait-ready; stop.yml: stop) and by the watchdog
# (wait-ready, stop), which gets it with the engine's descriptor. The engine is the process whose
# pid its launch script wrote to the state folder (its first act), serving at the loopback URL.
#   status     DIR [URL]                     one JSON line: alive, healthy, id (the launch it runs), pid;
#                                            without URL (a headless rank: no API) healthy is false
#   wait-ready DIR URL SECONDS PLACEMENT_S   until /health answers (exit 0), the engine dies (3), Ray
#                                            has not given it its GPUs for PLACEMENT_S (4, R5) or
#                                            SECONDS pass (1); prints what it saw last
#   stop       DIR SECONDS                   SIGTERM, then up to SECONDS for a clean exit before
#                                            SIGKILL (a hard kill can leave unified memory held by
#                                            the driver until a reboot, H4); prints none, stopped or killed
cmd=$1 d=$2
engine_pid() { p=$(cat "$d/pid" 2>/dev/null) && [ -n "$p" ] && printf %s "$p"; }
# A vLLM process under that pid (not another that reused it); while starting, its launch script's
# shell holds the pid until it execs vllm, so wait-ready asks only that the process is there.
alive() { grep -q vllm "/proc/$1/cmdline" 2>/dev/null; }
there() { [ -e "/proc/$1/cmdline" ]; }
healthy() { python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "$1/health" 2>/dev/null; }
case "$cmd" in
  status)
    pid=$(engine_pid) a=false h=false
    if [ -n "$pid" ] && alive "$pid"; then a=true; [ -n "${3:-}" ] && healthy "$3" && h=true; fi
    id=$(sed -n 's/^# gb10-engine-id: //p' "$d/running.sh" 2>/dev/null)
    printf '{"alive": %s, "healthy": %s, "id": "%s", "pid": "%s"}\n' "$a" "$h" "$id" "$pid" ;;
  wait-ready)
    end=$(( $(date +%s) + $4 )) seen="engine starting (no pid yet)"
    while :; do
      # No pid yet: the launch script (docker exec -d) has not written it.
      if pid=$(engine_pid); then
        there "$pid" || { echo "engine process $pid is gone; its log: $d/engine.log"; exit 3; }
        healthy "$3" && { echo ready; exit 0; }
        # vLLM waits without end for a placement group a lost Ray node can no longer give (one GPU
        # per TP rank): a node left after the topology check (R5).
        waited=$(tail -n 20 "$d/engine.log" 2>/dev/null \
          | sed -n 's/.*Waiting for creating a placement group of specs for \([0-9][0-9]*\) seconds.*/\1/p' | sort -n | tail -n 1)
        if [ -n "$waited" ] && [ "$waited" -ge "$5" ]; then
          echo "Ray has not given the engine its GPUs for $waited s: a node left the cluster during start-up (R5; ray status in the head container)"
          exit 4
        fi
        seen="not ready; last log line: $(tail -n 1 "$d/engine.log" 2>/dev/null | cut -c1-200)"
      fi
      [ "$(date +%s)" -lt "$end" ] || { echo "$seen"; exit 1; }
      sleep 1
    done ;;
  stop)
    pid=$(engine_pid) && alive "$pid" || { echo none; exit 0; }
    kill -TERM "$pid" 2>/dev/null || { echo none; exit 0; }
    i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt "$3" ]; do sleep 1; i=$((i + 1)); done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; echo killed; else echo stopped; fi ;;
  *)
    echo "engine control: unknown command '$cmd' (status, wait-ready or stop)" >&2
    exit 2 ;;
esac
