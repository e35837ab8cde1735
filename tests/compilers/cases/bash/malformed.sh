# @describe Every malformed tag is reported together.
# @option path Missing the dashes.
# @option --mode[a|b Unclosed choices.
# @option --n <INT Unclosed notation.
# @flag --force! Flags cannot be required.
# @flag --level=3 Flags take no value.
# @option --x: Stray character.
# @env
# @meta require-tools
# @meta timeout soon
# @option --fn=`_missing` A function that does not exist.
main() { :; }
