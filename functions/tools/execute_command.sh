#!/usr/bin/env bash
set -e

# @describe Run a shell command and return what it printed (stdout and stderr together).
# The command runs with bash in the current working directory.
# @option --command! The command line to run, e.g. "ls -la | head".
# @env LLM_OUTPUT=/dev/stdout Where the result goes (set by the executor).
# @meta title Run shell command
# @meta summary Run a command line with bash and return its output.
# @meta tags shell,exec
# @meta read-only false
# @meta destructive
# @meta idempotent false
# @meta open-world
# @meta network all
# @meta writes cwd
# @meta example {"command": "ls -la | head"}
# @meta error the command's own exit status and stderr

main() {
    bash -c "$argc_command" >>"$LLM_OUTPUT" 2>&1
}

eval "$(argc --argc-eval "$0" "$@")"
