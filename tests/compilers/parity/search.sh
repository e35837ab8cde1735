#!/usr/bin/env bash
# @describe Search the web and return the top results.
# @option --query! What to search for.
# @option --limit=10 <INT> How many results to return.
# @option --mode[=fast|deep] Quick or thorough search.
# @option --sites* Only search these sites.
# @flag --fresh Prefer recent pages.
# @meta title Web search
# @meta summary Search the web.
# @meta tags web,search
# @meta read-only
# @meta open-world
# @meta timeout 20
# @meta example {"query": "toolexec"}
# @meta example {"query": "mcp", "limit": 3, "mode": "deep"}
# @meta error rate limited: too many searches in a minute
# @meta output-schema {"type": "object", "properties": {"urls": {"type": "array", "items": {"type": "string"}}, "engine": {"type": "string"}, "more": {"type": "boolean"}}, "required": ["urls", "engine"]}
main() { :; }
