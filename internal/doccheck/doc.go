// Package doccheck holds the tests that run the documentation (README.md
// and docs/*.md): every YAML block must load, every firstword command in a
// sh block must exit as documented, the README's quickstart must answer
// both SDK snippets, the claims docs/compatibility.md makes about the
// server are checked against it, every row of its tables names tests
// that exist (and a gap, a gap test), and the README's command table
// lists what `firstword help` lists. It has no code of its own.
package doccheck
