# @describe Top-level code is the tool when there is no main.
# @option --text! Text.
echo "$argc_text" >> "$LLM_OUTPUT"
