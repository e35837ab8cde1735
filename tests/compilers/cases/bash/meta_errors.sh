#!/usr/bin/env bash
# @describe Every kind of malformed metadata, reported together.
# @meta title
# @meta tags fs,file system
# @meta read-only maybe
# @meta destructive
# @meta example {"path": ".", "limit": "ten"}
# @meta example {"limit": 3}
# @meta example {"path": }
# @meta output-schema {"type": "arry"}
# @option --path! Directory to list.
# @option --limit=10 <INT> At most this many entries.
main() { :; }
