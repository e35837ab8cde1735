#!/usr/bin/env bash
# @describe Rebuild the search index.
# @meta task optional
# @meta timeout 1800
# @option --path! The folder to index.
main() {
    sleep 5
    echo "rebuilt $argc_path" >>"$LLM_OUTPUT"
}
eval "$(argc --argc-eval "$0" "$@")"
