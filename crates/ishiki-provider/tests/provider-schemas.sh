#!/usr/bin/env bash
# Fetches the official SDKs from the npm registry into DIR (git-ignored `<repo>/.tools/...`) and
# generates JSON Schemas of their request types with ts-json-schema-generator:
#   DIR/anthropic.schema.json  MessageCreateParamsNonStreaming      (@anthropic-ai/sdk)
#   DIR/openai.schema.json     ChatCompletionCreateParamsNonStreaming (openai)
#   DIR/openai-responses.schema.json  ResponseCreateParamsNonStreaming (openai)
# Versions are pinned so a run is repeatable; bump them deliberately.
set -euo pipefail
dir="$1"
mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{ "private": true }' > package.json
npm install --no-audit --no-fund --silent \
  @anthropic-ai/sdk@1.14.0 openai@6.49.0 ts-json-schema-generator@2.4.0
gen() {
  npx --no-install ts-json-schema-generator --no-type-check --expose none \
    --path "$1" --type "$2" -o "$3.tmp"
  mv "$3.tmp" "$3"
}
gen node_modules/@anthropic-ai/sdk/resources/messages/messages.d.ts \
  MessageCreateParamsNonStreaming anthropic.schema.json
# The beta request: compaction requests and the blocks they return.
gen node_modules/@anthropic-ai/sdk/resources/beta/messages/messages.d.ts \
  MessageCreateParamsNonStreaming anthropic-beta.schema.json
gen node_modules/openai/resources/chat/completions/completions.d.ts \
  ChatCompletionCreateParamsNonStreaming openai.schema.json
gen node_modules/openai/resources/responses/responses.d.ts \
  ResponseCreateParamsNonStreaming openai-responses.schema.json
