// Package config owns vipd's TOML configuration: the schema, its defaults and
// its validation.
//
// Load reads a file, rejects unknown keys (a typo must never silently become a
// default), fills in defaults and validates the whole document, returning every
// problem at once as an *Errors value whose entries name the file, the key
// path and, where the TOML decoder knows it, the line. Warnings (legal but
// questionable settings) are returned next to a valid Config.
//
// The package knows nothing about sockets or packets; later stages compile a
// validated Config into the dataplane snapshot.
package config
