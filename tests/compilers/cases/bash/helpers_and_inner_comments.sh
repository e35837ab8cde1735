#!/usr/bin/env bash
set -euo pipefail

# @describe Helpers start with an underscore; comments inside functions are not tags.
# @option --dir! Directory.

_helper() {
  # @option --not-a-tag inside a function
  ls "$1"
}

main() {
  _helper "$argc_dir" >> "$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
