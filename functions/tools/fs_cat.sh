#!/usr/bin/env bash
set -e

# @describe Read a text file and return its contents.
# Use it to look at configuration files, source code or notes.
# @option --path! File to read.
# @meta title Read file
# @meta tags fs,read
# @meta read-only
# @meta idempotent
# @meta open-world false
# @meta example {"path": "README.md"}
# @meta error no such file: the path does not exist
# @meta error is a directory: the path names a directory, not a file

main() {
    cat -- "$argc_path" >>"$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
