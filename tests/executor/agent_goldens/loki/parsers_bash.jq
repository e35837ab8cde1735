def prop:
  (if .flag then {type: "boolean"}
   elif .multiple_occurs then {type: "array", items: {type: "string"}}
   elif (.notations[0] // "") == "INT" then {type: "integer"}
   elif (.notations[0] // "") == "NUM" then {type: "number"}
   else {type: "string"} end) as $t
  | {type: $t.type}
  + (if .describe != "" then {description: .describe} else {} end)
  + (if $t.items then {items: $t.items} else {} end)
  + (if .choice.type == "Values" and (.choice.data | length) > 0 then {enum: .choice.data} else {} end);
[.subcommands[]
 | select((.name | startswith("_") | not) or .name == "_instructions")
 | {name: (.name | gsub("-"; "_")), description: .describe,
    parameters: {type: "object",
      properties: (reduce (.flag_options[] | select(.id != "help" and .id != "version")) as $f ({}; . + {($f.id | gsub("-"; "_")): ($f | prop)})),
      required: [.flag_options[] | select(.id != "help" and .id != "version") | select(.required) | .id | gsub("-"; "_")]}}]
