#!/usr/bin/env bash
# @describe Apply a patch to a file.
# Comment lines after a tag continue its text;
#   their indentation is kept.
# @option --path! The file to change.
# @option --contents! The patch, as a unified diff. For example:
#
#     --- a/notes.txt
#     +++ b/notes.txt
# \@@ -1 +1 @@
#     -old line
#     +new line
# @flag --dry-run Only show what would change.
# A line starting with \@ is text, not a tag.

# This comment follows a blank line: it belongs to no tag.
main() {
  printf 'patched %s\n' "$argc_path" >> "$LLM_OUTPUT"
}
