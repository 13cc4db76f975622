// Package docscheck holds the tests that keep the repository's documentation honest: README.md
// stays a page a newcomer reads (under 300 lines, the two everyday commands near the top, links
// only to files in the repository), and every relative link of README.md and docs/*.md resolves
// to a file, and its #anchor to a heading of that file. It has no code of its own.
package docscheck
