#!/usr/bin/env bash
set -e

# @describe Read a text file and return its contents.
# Use it to look at configuration files, source code or notes.
# @option --path! File to read.

main() {
    cat -- "$argc_path" >>"$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
