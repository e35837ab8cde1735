#!/usr/bin/env bash
# @describe Show the disk usage of a directory.
# Sizes are reported in kilobytes.
#
# Hidden files are included.
# @option --path The directory.
main() { du -sk "${argc_path:-.}" >> "$LLM_OUTPUT"; }
