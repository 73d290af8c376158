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
  (cd "$1" && find . -type f ! -name '.gb10-*' -printf '%P\t%s\t%T@\n' | LC_ALL=C sort | sha256sum | cut -c1-64)
}

manifest_digest() { sha256sum "$1.sha256" | cut -c1-64; }

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
  (cd "$1" && find . -type f ! -name '.gb10-*' -print0 | LC_ALL=C sort -z \
    | xargs -0 -r -n 4 -P "$2" python3 -c "$SHA256_PY"'
for path in sys.argv[1:]:
    print("%s  %s" % (digest(path), path))') | LC_ALL=C sort -k2
}

verify() {  # DIR STATE STREAMS -> "./path: FAILED" for each file that fails its checksum
  local dir=$1 state=$2 streams=$3 part
  rm -f "$state".part.*
  split -n "r/$streams" "$state.sha256" "$state.part."
  for part in "$state".part.*; do
    (cd "$dir" && python3 -c "$SHA256_PY"'
for line in open(sys.argv[1]):
    want, path = line.rstrip("\n").split("  ", 1)
    try:
        ok = digest(path) == want
    except OSError:
        ok = False
    if not ok:
        print("%s: FAILED" % path)' "$part" || true) &
  done
  wait
  rm -f "$state".part.*
}

cmd=$1
dir=$2
state=$3
case "$cmd" in
  manifest)
    streams=$4
    [ -d "$dir" ] && [ -n "$(find "$dir" -type f ! -name '.gb10-*' -print -quit)" ] \
      || { echo "{\"failed\": true, \"msg\": \"no model files under $dir\"}"; exit 1; }
    mkdir -p "$(dirname "$state")"
    listing=$(listing_digest "$dir")
    recomputed=false
    if [ ! -f "$state.sha256" ] || [ "$(cat "$state.listing" 2>/dev/null)" != "$listing" ]; then
      checksum_all "$dir" "$streams" >"$state.sha256.tmp"
      mv "$state.sha256.tmp" "$state.sha256"
      echo "$listing" >"$state.listing"
      recomputed=true
    fi
    files=$(wc -l <"$state.sha256")
    # printf "%.0f": mawk (Debian's default awk) prints sums of 2^31 and more as 4.29497e+09.
    bytes=$(cd "$dir" && find . -type f ! -name '.gb10-*' -printf '%s\n' | awk '{s+=$1} END {printf "%.0f\n", s}')
    printf '{"digest": "%s", "files": %d, "bytes": %d, "recomputed": %s}\n' \
      "$(manifest_digest "$state")" "$files" "$bytes" "$recomputed"
    ;;
  check)
    complete=false
    if [ -d "$dir" ] && [ -f "$state.sha256" ] && [ -f "$state.verified" ] \
      && [ "$(cat "$state.verified")" = "$(manifest_digest "$state") $(listing_digest "$dir")" ]; then
      complete=true
    fi
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
    start=$(date +%s)
    # One rsync per stream, each on its share of the files: one TCP stream does not fill the
    # link (M3: rsync alone saw 370 MB/s). --partial keeps an interrupted file so the next run
    # resumes it with rsync's delta transfer instead of starting over.
    rsync_streams() {  # LISTFILE (paths relative to the module)
      local part rc=0
      rm -f "$state".files.*
      split -n "r/$streams" "$1" "$state.files."
      for part in "$state".files.*; do
        [ -s "$part" ] || continue
        rsync -a --partial --files-from="$part" "$url/" "$dir/" &
      done
      for part in $(jobs -p); do wait "$part" || rc=$?; done
      rm -f "$state".files.*
      return "$rc"
    }
    sed -E 's/^[0-9a-f]{64}  \.\///' "$state.sha256" >"$state.all"
    rsync_streams "$state.all" || { echo '{"failed": true, "msg": "rsync failed, see stderr"}'; exit 1; }
    bad=$(verify "$dir" "$state" "$streams" | sed -nE 's/^\.\/(.*): FAILED.*$/\1/p')
    repaired=0
    if [ -n "$bad" ]; then
      # Same size and mtime but other content: rsync's quick check keeps such a file, so drop
      # it and fetch it whole.
      printf '%s\n' "$bad" >"$state.bad"
      repaired=$(wc -l <"$state.bad")
      (cd "$dir" && xargs -d '\n' rm -f -- <"$state.bad")
      rsync_streams "$state.bad" || { echo '{"failed": true, "msg": "rsync failed, see stderr"}'; exit 1; }
      bad=$(verify "$dir" "$state" "$streams" | sed -nE 's/^\.\/(.*): FAILED.*$/\1/p')
      if [ -n "$bad" ]; then
        printf '{"failed": true, "msg": "checksum mismatch after a second copy: %s"}\n' "$(echo "$bad" | head -n 3 | tr '\n' ' ')"
        exit 1
      fi
    fi
    rm -f "$state.all" "$state.bad"
    echo "$(manifest_digest "$state") $(listing_digest "$dir")" >"$state.verified"
    printf '{"seconds": %d, "repaired": %d}\n' "$(( $(date +%s) - start ))" "$repaired"
    ;;
  *)
    echo "{\"failed\": true, \"msg\": \"unknown command $cmd\"}"
    exit 2
    ;;
esac
