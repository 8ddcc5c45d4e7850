; Line comments `// ...` (the only comment form in BSL).
(line_comment) @comment
