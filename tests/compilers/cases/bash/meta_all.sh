#!/usr/bin/env bash
# @describe List the entries of a directory.
# Directories come first; each entry carries its size in bytes.
# @meta title List directory
# @meta summary List a directory's entries with their sizes.
# @meta tags fs,read
# @meta read-only
# @meta idempotent true
# @meta open-world false
# @meta timeout 30
# @meta max_output_bytes 65536
# @meta example {"path": "."}
# @meta example {"path": "/tmp", "limit": 5}
# @meta error not a directory: the path exists but is a file
# @meta error permission denied: the directory cannot be read
# @meta output-schema {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
# @option --path! Directory to list.
# @option --limit=100 <INT> At most this many entries.
main() { ls -- "$argc_path" >>"$LLM_OUTPUT"; }
eval "$(argc --argc-eval "$0" "$@")"
