#!/usr/bin/env bash
set -euo pipefail

# @describe Remove a file, or a directory with everything in it when --recursive is given.
# This cannot be undone.
# @option --path! The file or directory to remove.
# @flag --recursive Remove a directory and all its contents.
# @meta title Remove file or directory
# @meta summary Delete a file, or a directory tree with --recursive.
# @meta tags fs,write,delete
# @meta read-only false
# @meta destructive
# @meta idempotent
# @meta open-world false
# @meta example {"path": "build/old.log"}
# @meta example {"path": "build/tmp", "recursive": true}
# @meta error not found: nothing exists at the path
# @meta error is a directory: give recursive to remove a directory
# @meta error refused: the root directory or the home directory

main() {
    local path=$argc_path
    if [[ ! -e $path && ! -L $path ]]; then
        echo "not found: $path" >&2
        exit 1
    fi
    local real
    real=$(realpath -m -- "$path")
    if [[ $real == / || $real == "$(realpath -m -- "${HOME:-/}")" ]]; then
        echo "refused: will not remove $real" >&2
        exit 1
    fi
    if [[ -d $path && ! -L $path ]]; then
        if [[ -z ${argc_recursive:-} ]]; then
            echo "$path is a directory; set recursive to remove it and everything in it" >&2
            exit 1
        fi
        rm -r -- "$path"
    else
        rm -- "$path"
    fi
    printf 'removed %s\n' "$path" >>"$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
