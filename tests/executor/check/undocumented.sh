#!/usr/bin/env bash
set -euo pipefail

# @describe Count the lines of a file.
# @option --path! The file to count.
# @option --encoding
# @flag --verbose

main() {
    wc -l -- "$argc_path" >>"$LLM_OUTPUT"
}
