# @describe Dotted and dashed option names, as argc binds them.
# @option --foo.bar A dotted option.
# @option --baz-qux! A dashed one.
# @flag --dry.run A dotted flag.
main() { :; }
