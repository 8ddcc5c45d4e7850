; Annotations and compilation directives: `&НаСервере`, `&AtClient`, `&Вместо("X")`, `&After("X")`.
; @annotation: the `&Имя` part; @argument: the string argument, if any.
(preprocessor
  (annotation) @annotation
  (string)? @argument)
