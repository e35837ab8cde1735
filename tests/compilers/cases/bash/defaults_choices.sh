# @describe Defaults and choices.
# @option --mode[fast|slow] A choice.
# @option --level[=low|mid|high] A choice with its first value as default.
# @option --name=world A default.
# @option --greeting="hello there" A quoted default.
# @option --limit=10 <INT> A typed default.
# @option --tags*,=a,b Default list.
# @option --when=`_today` Default computed at run time.
# @option --pick[`_choices`] Choices computed at run time.
# @option --loose[?`_choices`] Suggestions, not checked.
# @option --must![a|b] Required with choices.
_today() { date +%F; }
_choices() { printf '%s\n' x y; }
main() { :; }
