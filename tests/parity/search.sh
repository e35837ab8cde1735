#!/usr/bin/env bash
# @describe Search the web and return the top results.
# @option --query! What to search for.
# @option --limit=10 <INT> How many results to return.
# @option --mode[=fast|deep] Quick or thorough search.
# @option --sites* Only search these sites.
# @flag --fresh Prefer recent pages.
main() { :; }
