// Package claims holds repository-wide checks of what the comments and
// documents claim about the code: today, that every test, benchmark and
// fuzz target they name exists. A comment that names a test as the proof
// of a claim is only worth something while that test is there. The
// package has no code of its own, only its tests.
package claims
