#!/usr/bin/env bash
set -e

# @describe List the entries of a directory, one per line; directories end with '/'.
# @option --path! Directory to list.
# @flag --all Include entries whose names start with a dot.
# @meta title List directory
# @meta tags fs,read
# @meta read-only
# @meta idempotent
# @meta open-world false
# @meta example {"path": "."}
# @meta example {"path": "/tmp", "all": true}
# @meta error not a directory: the path does not exist or is not a directory

main() {
    if [[ ! -d $argc_path ]]; then
        echo "not a directory: $argc_path" >&2
        exit 1
    fi
    local flags=(-1 -p)
    [[ -n ${argc_all:-} ]] && flags+=(-A)
    ls "${flags[@]}" -- "$argc_path" >>"$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
