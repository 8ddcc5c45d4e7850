; Method definitions (tree-sitter-hbk 0.1.11 node names; tree-sitter-bsl 0.1.6 uses the same).
; @method: the whole definition, from `Асинх`/`Процедура` through `КонецПроцедуры`;
; @name: the name identifier (both grammars truncate identifiers at ё/Ё: read the name from
; the source text, not from the node); @params: the parameter list with its parentheses;
; @export: the `Экспорт`/`Export` keyword; @async: `Асинх`/`Async`.
(procedure_definition
  (ASYNC_KEYWORD)? @async
  name: (identifier) @name
  parameters: (parameters)? @params
  export: (EXPORT_KEYWORD)? @export) @method

(function_definition
  (ASYNC_KEYWORD)? @async
  name: (identifier) @name
  parameters: (parameters)? @params
  export: (EXPORT_KEYWORD)? @export) @method
