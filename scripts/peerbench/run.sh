#!/usr/bin/env bash
# One command for the peer benchmark (see README.md):
#
#   npm run bench:peers                              (this checkout)
#   TRELLIS_DIR=<an installed Trellis checkout> scripts/peerbench/run.sh
#   TRELLIS_REPO=<a Trellis git repo to clone> scripts/peerbench/run.sh
#
# Copies the two peer projects (peers/cfwf, peers/restate) into $WORK_DIR
# (default: ${TMPDIR:-/tmp}/trellis-peerbench), installs them with npm when their
# package.json changed, clones and installs Trellis there when only
# TRELLIS_REPO is given, then runs bench.mjs. Everything bench.mjs reads from
# the environment (REPEATS, WARMUP, POLL_MS, ENGINES, WORKLOADS, OUT_DIR, ...)
# passes through. Nothing is written next to this script.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK_DIR="$(realpath -m "${WORK_DIR:-${TMPDIR:-/tmp}/trellis-peerbench}")"
# The peers' installs and the results never go into the repository this script is in (its tree stays clean).
REPO_ROOT="$(cd "$HERE/../.." && pwd -P)"
case "$WORK_DIR/" in
  "$REPO_ROOT"/*)
    echo "WORK_DIR ($WORK_DIR) is inside $REPO_ROOT: choose a directory outside the repository" >&2
    exit 2
    ;;
esac
mkdir -p "$WORK_DIR"

install_peer() {
  local name="$1" dest="$WORK_DIR/$1"
  mkdir -p "$dest"
  # Sources are copied every time; npm install only when package.json differs from the installed copy's.
  local changed=1
  if [ -f "$dest/package.json" ] && [ -d "$dest/node_modules" ] && cmp -s "$HERE/peers/$name/package.json" "$dest/package.json"; then
    changed=0
  fi
  cp -R "$HERE/peers/$name/." "$dest/"
  if [ "$changed" = 1 ]; then
    echo "peerbench: npm install in $dest" >&2
    (cd "$dest" && npm install --no-audit --no-fund >&2)
  fi
}

if [ -z "${TRELLIS_DIR:-}" ]; then
  if [ -z "${TRELLIS_REPO:-}" ]; then
    echo "set TRELLIS_DIR (an installed Trellis checkout) or TRELLIS_REPO (a repo to clone into \$WORK_DIR/trellis)" >&2
    exit 2
  fi
  TRELLIS_DIR="$WORK_DIR/trellis"
  if [ ! -d "$TRELLIS_DIR/.git" ]; then
    git clone -q "$TRELLIS_REPO" "$TRELLIS_DIR"
  fi
fi
TRELLIS_DIR="$(cd "$TRELLIS_DIR" && pwd)"
if [ ! -d "$TRELLIS_DIR/node_modules/wrangler" ]; then
  echo "peerbench: npm install in $TRELLIS_DIR" >&2
  (cd "$TRELLIS_DIR" && npm install --no-audit --no-fund >&2)
fi

install_peer cfwf
install_peer restate

export TRELLIS_DIR CFWF_DIR="$WORK_DIR/cfwf" RESTATE_DIR="$WORK_DIR/restate"
export OUT_DIR="${OUT_DIR:-$WORK_DIR/results}"
exec node "$HERE/bench.mjs" "$@"
