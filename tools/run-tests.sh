#!/usr/bin/env bash
# Sets everything up, builds, and runs the whole test suite, then fuzzes the frontend for 30 s and
# the CSV and JSON readers for 10 s each (tests/fuzz, with their own instrumented build): a smoke
# run that keeps CI under 30 minutes; tools/fuzz.sh 600 for a real search.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
ctest --test-dir build --output-on-failure -j2
# A short fuzzing run of the frontend and the readers (tests/fuzz): any finding fails the run.
tools/fuzz.sh 30
