# Stop the engine gracefully: SIGTERM, then up to $2 seconds for a clean exit before SIGKILL (a
# hard-killed engine can leave unified memory held by the driver until a reboot, H4). $1 is the
# engine's state folder in the head container, where its launch script wrote its pid. Prints
# none, stopped or killed. Run with `sh -c` by tasks/stop.yml and by the watchdog (one definition).
pid=$(cat "$1/pid" 2>/dev/null) && grep -q vllm "/proc/$pid/cmdline" 2>/dev/null || { echo none; exit 0; }
kill -TERM "$pid" 2>/dev/null || { echo none; exit 0; }
i=0
while kill -0 "$pid" 2>/dev/null && [ "$i" -lt "$2" ]; do sleep 1; i=$((i + 1)); done
if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; echo killed; else echo stopped; fi
