#!/usr/bin/env bash
set -e

# @describe Run a shell command and return what it printed (stdout and stderr together).
# The command runs with bash in the current working directory.
# @option --command! The command line to run, e.g. "ls -la | head".
# @env LLM_OUTPUT=/dev/stdout Where the result goes (set by the executor).
# @meta title Run a shell command
# @meta tags shell
# @meta read-only false
# @meta destructive
# @meta idempotent false
# @meta open-world
# @meta example {"command": "ls -la | head"}
# @meta error non-zero exit: the command failed; its output says why

main() {
    bash -c "$argc_command" >>"$LLM_OUTPUT" 2>&1
}

eval "$(argc --argc-eval "$0" "$@")"
