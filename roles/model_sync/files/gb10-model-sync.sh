#!/usr/bin/env bash
# Helper of the gb10.serving.model_sync role (rule M3): a manifest of sizes and SHA-256 checksums
# on the node that has the model, and on every other node a resumable, parallel, verified pull
# over the cluster link from that node's temporary rsync daemon. Prints one JSON object.
#   manifest DIR STATE STREAMS        write STATE.sha256 (+ .listing) for DIR; reuse it while the
#                                     file listing (path, size, mtime) is unchanged
#   check    DIR STATE                is DIR verified against STATE.sha256 and unchanged since?
#   pull     DIR STATE STREAMS URL    copy what is missing or different, verify, mark complete
set -euo pipefail

listing_digest() {
  # Path, size and mtime of every file: cheap to read, changes when any file does.
  (cd "$1" && find . -name '.gb10-*' -prune -o -type f -printf '%P\t%s\t%T@\n' | LC_ALL=C sort | sha256sum | cut -c1-64)
}

manifest_digest() { sha256sum "$1.sha256" | cut -c1-64; }

copy_verified() {  # 1 or 0 -> STATE.prom
  # Whether this node's copy of DIR is verified against the manifest (M3), as a textfile that role
  # node_metrics' exporter serves (every *.prom below /var/lib/gb10): the watchdog reads it on every
  # node before it relaunches the engine, and relaunches nothing onto a copy that says 0 (a pull under
  # way or cut). No HELP/TYPE lines: one file per model folder, and a family's TYPE given twice on
  # one page would fail the scrape.
  printf 'gb10_model_copy_verified{path="%s"} %s\n' "$(printf '%s' "$dir" | sed 's/[\\"]/\\&/g')" "$1" \
    >"$state.prom.tmp" && mv "$state.prom.tmp" "$state.prom"
}

# SHA-256 through python3's hashlib (OpenSSL: SHA extensions on Grace's Neoverse V2 and on x86),
# not coreutils' sha256sum, which was 5.7x slower on the same files and made hashing, not the
# link, the bottleneck of the copy (BENCHMARKS.md). python3 is on every node for Ansible. Same
# line formats as sha256sum and `sha256sum -c --quiet`.
SHA256_PY='
import hashlib, sys
def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()
'

checksum_all() {  # DIR STREAMS -> "<sha256>  ./path" lines for every file, sorted by path
  # One python3 per stream on its share of the files, each writing a file of its own: processes
  # that share one pipe can interleave their output mid-line (xargs -P did, on a model of 150
  # files: a manifest with glued and empty lines). Returns non-zero if a file could not be read.
  local part pid rc=0
  rm -f "$state".hash.*
  (cd "$1" && find . -name '.gb10-*' -prune -o -type f -print | LC_ALL=C sort) | split -n "r/$2" - "$state.hash."
  for part in "$state".hash.*; do
    [ -s "$part" ] || continue
    (cd "$1" && python3 -c "$SHA256_PY"'
for line in open(sys.argv[1]):
    path = line.rstrip("\n")
    print("%s  %s" % (digest(path), path))' "$part") >"$part.sums" &
  done
  for pid in $(jobs -p); do wait "$pid" || rc=$?; done
  [ "$rc" -ne 0 ] || cat "$state".hash.*.sums | LC_ALL=C sort -k2
  rm -f "$state".hash.*
  return "$rc"
}

# Reads one stream's rsync log ("<bytes> <path>" per file, written when the file's data is in, then
# "exit <rsync's status>") and checks that stream's files against their manifest lines (argv[1])
# while rsync goes on with the next file, so the pull costs about max(transfer, hash), not their sum
# (BENCHMARKS.md). rsync logs a file before it renames it into place, and one receiver process
# handles one file at a time: a file is complete once rsync logs the next one, or has exited.
# Files rsync did not need to send (same size and mtime) are checked after it exits. Prints the
# path of each file that fails; exits with rsync's status.
VERIFY_STREAM_PY='
want = {}
for line in open(sys.argv[1]):
    checksum, path = line.rstrip("\n").split("  ", 1)
    want[path[2:]] = checksum
result = {}
def check(path):
    try:
        result[path] = digest(path) == want[path]
    except OSError:
        result[path] = False
pending, status = None, 1
for line in sys.stdin:
    first, _, rest = line.rstrip("\n").partition(" ")
    if first == "exit":
        status = int(rest)
    elif rest in want:
        if pending:
            check(pending)
        pending = rest  # a resent file is checked again: the last result counts
if status == 0:
    if pending:
        check(pending)
    for path in want:
        if path not in result:
            check(path)
    for path in sorted(p for p, ok in result.items() if not ok):
        print(path)
sys.exit(status)
'

fetch_verified() {  # MANIFEST (lines of STATE.sha256) -> path of each file that fails its checksum
  # One rsync per stream, each on its share of the files: one TCP stream does not fill the link
  # (M3: rsync alone saw 370 MB/s). --partial-dir keeps an interrupted file in .gb10-partial/ beside
  # it, so the next run resumes it with rsync's delta transfer instead of starting over, and never
  # under its real name: a copy cut halfway leaves only whole files where the engine looks (each
  # renamed into place once all of it is in), and the node's copy is not verified until every
  # checksum is (the .verified marker). Paths named .gb10-* are the sync's own, never the model's
  # (left out of the listing and the manifest). Returns non-zero if an rsync failed.
  local part pid rc=0
  rm -f "$state".stream.*
  split -n "r/$streams" "$1" "$state.stream."
  for part in "$state".stream.*; do
    [ -s "$part" ] || continue
    sed -E 's/^[0-9a-f]{64}  \.\///' "$part" >"$part.files"
    { rsync -a --partial-dir=.gb10-partial --out-format='%b %n' --files-from="$part.files" "$url/" "$dir/" \
        && echo "exit 0" || echo "exit $?"; } \
      | (cd "$dir" && python3 -c "$SHA256_PY$VERIFY_STREAM_PY" "$part") >"$part.failed" &
  done
  for pid in $(jobs -p); do wait "$pid" || rc=$?; done
  [ "$rc" -ne 0 ] || cat "$state".stream.*.failed
  rm -f "$state".stream.*
  return "$rc"
}

cmd=$1
dir=$2
state=$3
case "$cmd" in
  manifest)
    streams=$4
    [ -d "$dir" ] && [ -n "$(find "$dir" -name '.gb10-*' -prune -o -type f -print -quit)" ] \
      || { echo "{\"failed\": true, \"msg\": \"no model files under $dir\"}"; exit 1; }
    mkdir -p "$(dirname "$state")"
    listing=$(listing_digest "$dir")
    recomputed=false
    if [ ! -f "$state.sha256" ] || [ "$(cat "$state.listing" 2>/dev/null)" != "$listing" ]; then
      checksum_all "$dir" "$streams" >"$state.sha256.tmp" \
        || { echo "{\"failed\": true, \"msg\": \"could not read every file under $dir, see stderr\"}"; exit 1; }
      mv "$state.sha256.tmp" "$state.sha256"
      echo "$listing" >"$state.listing"
      recomputed=true
    fi
    files=$(wc -l <"$state.sha256")
    # printf "%.0f": mawk (Debian's default awk) prints sums of 2^31 and more as 4.29497e+09.
    bytes=$(cd "$dir" && find . -name '.gb10-*' -prune -o -type f -printf '%s\n' | awk '{s+=$1} END {printf "%.0f\n", s}')
    copy_verified 1  # the source's copy is what the manifest describes
    printf '{"digest": "%s", "files": %d, "bytes": %d, "recomputed": %s}\n' \
      "$(manifest_digest "$state")" "$files" "$bytes" "$recomputed"
    ;;
  check)
    complete=false
    if [ -d "$dir" ] && [ -f "$state.sha256" ] && [ -f "$state.verified" ] \
      && [ "$(cat "$state.verified")" = "$(manifest_digest "$state") $(listing_digest "$dir")" ]; then
      complete=true
    fi
    if [ "$complete" = true ]; then copy_verified 1; else copy_verified 0; fi
    printf '{"complete": %s}\n' "$complete"
    ;;
  pull)
    streams=$4
    url=$5
    need=$6
    mkdir -p "$dir"
    have=$(du -sb "$dir" | cut -f1)
    avail=$(df --output=avail -B1 "$dir" | tail -n1 | tr -d ' ')
    if [ $((avail + have)) -lt "$need" ]; then
      printf '{"failed": true, "msg": "%s has %d bytes free and %d of the model, the model needs %d"}\n' \
        "$dir" "$avail" "$have" "$need"
      exit 1
    fi
    rm -f "$state.verified"  # an interrupted pull must not look complete
    copy_verified 0
    start=$(date +%s)
    fetch_verified "$state.sha256" >"$state.bad" \
      || { echo '{"failed": true, "msg": "rsync failed, see stderr"}'; exit 1; }
    repaired=$(wc -l <"$state.bad")
    if [ "$repaired" -gt 0 ]; then
      # Same size and mtime but other content: rsync's quick check keeps such a file, so drop
      # it and fetch it whole.
      (cd "$dir" && xargs -d '\n' rm -f -- <"$state.bad")
      awk 'NR == FNR { bad["./" $0] = 1; next } substr($0, 67) in bad' "$state.bad" "$state.sha256" \
        >"$state.bad.sha256"
      fetch_verified "$state.bad.sha256" >"$state.bad" \
        || { echo '{"failed": true, "msg": "rsync failed, see stderr"}'; exit 1; }
      if [ -s "$state.bad" ]; then
        printf '{"failed": true, "msg": "checksum mismatch after a second copy: %s"}\n' "$(head -n 3 "$state.bad" | tr '\n' ' ')"
        exit 1
      fi
    fi
    rm -f "$state.bad" "$state.bad.sha256"
    echo "$(manifest_digest "$state") $(listing_digest "$dir")" >"$state.verified"
    copy_verified 1
    printf '{"seconds": %d, "repaired": %d}\n' "$(( $(date +%s) - start ))" "$repaired"
    ;;
  *)
    echo "{\"failed\": true, \"msg\": \"unknown command $cmd\"}"
    exit 2
    ;;
esac
