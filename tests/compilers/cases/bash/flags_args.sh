# @describe Flags and positional arguments.
# @flag --force Overwrite.
# @flag -q --quiet Say less.
# @flag --verbose* More output each time.
# @arg source! Where from.
# @arg target Where to.
# @arg extras* Anything else.
main() { :; }
