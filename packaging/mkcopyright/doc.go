// Command mkcopyright writes the package's /usr/share/doc/vipd/copyright
// in Debian's machine-readable format (DEP-5) to stdout: the header and
// vipd's own paragraph from a template, then a Files paragraph for the
// Go runtime and standard library and for every Go module compiled into
// the given commands, with the copyright lines and license of each (its
// LICENSE file from the module cache, so `go mod download` first). The
// binaries are static: they carry that code, and licenses such as Expat
// and BSD ask that its notices go with them. A module whose license it
// cannot name fails the run rather than ship unnamed; `make deb` runs it.
//
//	go run ./packaging/mkcopyright -header packaging/deb/copyright.in ./cmd/vipd ./cmd/vipd-decap
package main
