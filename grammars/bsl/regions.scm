; Regions `#Область Имя` ... `#КонецОбласти` (tree-sitter-hbk 0.1.11 nests the region's
; content inside the preprocessor node). @region: the whole region; @name: its name.
(preprocessor
  (PREPROC_REGION_KEYWORD)
  name: (identifier) @name) @region
