#!/usr/bin/env bash
# Regenerate the goldens of tests/executor/test_agents.py with the projects' own generators.
#
#   tests/executor/agent_goldens/regenerate.sh LLM_FUNCTIONS_CHECKOUT [ARGC]
#
# llm-functions/<agent>.json: what `argc build-declarations@agent` of an llm-functions checkout
#   (github.com/sigoden/llm-functions, scripts/build-declarations.{sh,py,js}, MIT) writes to
#   agents/<agent>/functions.json for the fixture agents, run in a scratch copy of the checkout
#   with the real argc (1.22.0) on PATH.
# loki/<agent>.json for Bash: Loki's src/parsers/bash.rs (serde field order: type, description,
#   items, enum; `required` always written; `_instructions` kept) applied by parsers_bash.jq to
#   the real `argc --argc-export` of the fixture.
# loki/tally_py.json is not generated: it is src/parsers/python.rs read by hand (the whole
#   docstring as the description, `underscore` names, *args as an array, **kwargs as a string).
# loki/tally_ts.json is not generated either: it is Coyote's src/parsers/typescript.rs read by hand
#   (JSDoc text before the first @tag, types from the signature, `Record<…>` a string, defaults optional).
set -euo pipefail
checkout=$(cd "$1" && pwd)
argc=${2:-$(command -v argc)}
here=$(cd "$(dirname "$0")" && pwd)
fixtures="$here/../agent_fixtures"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/bin" "$scratch/lf"
ln -s "$argc" "$scratch/bin/argc"
cp -r "$checkout/." "$scratch/lf/"
rm -rf "$scratch/lf/agents" "$scratch/lf/tools"
cp -r "$fixtures/llm-functions/agents" "$fixtures/llm-functions/tools" "$scratch/lf/"
(cd "$scratch/lf/agents" && ls -1) >"$scratch/lf/agents.txt"
(cd "$scratch/lf" && PATH="$scratch/bin:$PATH" argc build-declarations@agent --names-file agents.txt)
for agent in $(cat "$scratch/lf/agents.txt"); do
  cp "$scratch/lf/agents/$agent/functions.json" "$here/llm-functions/$agent.json"
done
"$argc" --argc-export "$fixtures/loki/agents/tally_sh/tools.sh" | jq -f "$here/loki/parsers_bash.jq" >"$here/loki/tally_sh.json"
