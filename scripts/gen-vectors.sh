#!/usr/bin/env bash
# Rewrites docs/vectors/*.json from the codecs (Tests/SIMPCoreTests/VectorTests.swift). Run it
# only when a wire change is meant: the test suite fails while the files and the codecs differ.
set -euo pipefail
cd "$(dirname "$0")/.."
SIMP_WRITE_VECTORS=1 swift test --filter "VectorTests/theVectorFilesAreWhatTheCodecsMake|TokenVectorTests/theFileIsWhatTheSignerMakes"
git status --short docs/vectors
