// Package testkit holds what the repository's tests share that is not a
// network namespace (those are testing/nstest): waiting for a condition,
// and running a function in the background for a test.
//
// A test that waits for something another goroutine, process or kernel
// does polls with Eventually (or Poll when it reports the failure itself,
// or Stable when the condition must also hold for a while) rather than
// sleeping or writing its own deadline loop. A wait ends as soon as its
// condition holds, so its timeout is a bound for a busy machine, not a
// delay: timeouts are generous on purpose. (Loops that read packets until
// a deadline, or sample a value as often as they can, are not waits and
// keep their own.)
//
// A daemon's or server's Run that a test starts runs with Go, which stops
// it when the test ends and fails the test if it returns an error or does
// not stop in time.
package testkit
