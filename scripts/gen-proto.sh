#!/usr/bin/env bash
# Regenerates Sources/SIMPCore/Generated/simp.pb.swift from proto/simp.proto.
# Needs protoc (Debian: protobuf-compiler) and builds protoc-gen-swift from the
# swift-protobuf version this package resolves (about two minutes the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v protoc >/dev/null || apt-get install -y protobuf-compiler
work=${PROTOC_GEN_SWIFT_DIR:-.build-protoc}
if [ ! -x "$work/debug/protoc-gen-swift" ]; then
  swift package resolve
  src=.build/checkouts/swift-protobuf
  swift build --package-path "$src" --scratch-path "$work" --product protoc-gen-swift
fi
mkdir -p Sources/SIMPCore/Generated
protoc --plugin=protoc-gen-swift="$work/debug/protoc-gen-swift" \
  --swift_opt=Visibility=Public \
  --swift_out=Sources/SIMPCore/Generated -I proto proto/simp.proto
echo "generated Sources/SIMPCore/Generated/simp.pb.swift"
