#!/usr/bin/env bash
# @describe Push a repository.
# @meta scope repo:read repo:write
# @meta scope admin
# @option --repo! the repository
main() { echo "$argc_repo" >> "$LLM_OUTPUT"; }
eval "$(argc --argc-eval "$0" "$@")"
