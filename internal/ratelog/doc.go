// Package ratelog keeps a repeated warning from flooding the log: a
// slog.Handler that passes the first warning with a given message and
// attributes, drops the same warning for a while, and notes how many it
// dropped on the next one it passes. Errors, info and debug records pass
// untouched. A box whose host keeps changing, or whose backend keeps
// failing, then logs the condition once a minute instead of many times a
// second, and the journal keeps what came before.
package ratelog
