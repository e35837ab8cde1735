#!/usr/bin/env bash
set -euo pipefail

# @describe Write text to a file, replacing what it held; missing parent directories are created.
# The text is written exactly as given (no newline is added).
# @option --path! The file to write.
# @option --contents! The complete new contents of the file.
# @meta title Write file
# @meta summary Create or overwrite a text file with the given contents.
# @meta tags fs,write
# @meta read-only false
# @meta destructive
# @meta idempotent
# @meta open-world false
# @meta example {"path": "notes/todo.md", "contents": "- write the report\n"}
# @meta error is a directory: the path names a directory
# @meta error permission denied: the file or its directory cannot be written

main() {
    if [[ -d $argc_path ]]; then
        echo "$argc_path is a directory; name a file to write" >&2
        exit 1
    fi
    mkdir -p -- "$(dirname -- "$argc_path")"
    printf '%s' "$argc_contents" >"$argc_path"
    printf 'wrote %s bytes to %s\n' "$(wc -c <"$argc_path" | tr -d ' ')" "$argc_path" >>"$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
