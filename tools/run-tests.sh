#!/usr/bin/env bash
# Sets everything up, builds, and runs the whole test suite, then fuzzes the frontend for a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
ctest --test-dir build --output-on-failure -j2
# A short fuzzing run of the frontend (tests/fuzz): any crash fails the run.
tools/fuzz.sh 60
