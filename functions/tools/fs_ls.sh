#!/usr/bin/env bash
set -e

# @describe List the entries of a directory, one per line; directories end with '/'.
# @option --path! Directory to list.
# @flag --all Include entries whose names start with a dot.
# @meta title List directory
# @meta summary List the entries of a directory.
# @meta tags fs,read
# @meta read-only
# @meta destructive false
# @meta idempotent
# @meta open-world false
# @meta network none
# @meta writes none
# @meta reads /tmp
# @meta example {"path": "."}
# @meta example {"path": "src", "all": true}
# @meta error not a directory: the path does not exist or is a file

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
