#!/usr/bin/env bash
# @describe A thing
# @meta network none
# @meta writes cache,cwd
# @meta reads ~/.aws
# @meta env GITHUB_TOKEN
# @meta memory 256MiB
# @meta cpu 10
# @meta processes 64
# @meta file-size 10MiB
# @option --x
main() { echo hi; }
eval "$(argc --argc-eval "$0" "$@")"
