// Package claims holds repository-wide checks of what the comments and
// documents claim about the code and about each other: that every test,
// benchmark and fuzz target they name exists (a comment that names a test
// as the proof of a claim is only worth something while that test is
// there), and that every cross-reference of the documents, the man pages,
// the example configuration and the comments names a file, a section and
// a man page that exist (a reader sent to a section that moved is lost).
// The package has no code of its own, only its tests.
package claims
