#!/usr/bin/env bash
set -euo pipefail

# @describe Create a directory, and any missing parent directories; an existing directory is fine.
# @option --path! The directory to create.
# @meta title Make directory
# @meta summary Create a directory with its parents (like mkdir -p).
# @meta tags fs,write
# @meta read-only false
# @meta destructive false
# @meta idempotent
# @meta open-world false
# @meta example {"path": "build/reports"}
# @meta error exists and is not a directory: a file of that name is in the way

main() {
    if [[ -e $argc_path && ! -d $argc_path ]]; then
        echo "$argc_path exists and is not a directory" >&2
        exit 1
    fi
    mkdir -p -- "$argc_path"
    printf 'created %s\n' "$argc_path" >>"$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
