// Package etcdtest runs real etcd for tests: an embedded cluster of one or
// three members (go.etcd.io/etcd/server/v3/embed, the version vipd's client
// is built against), or Debian's etcd binary as a single member
// (StartBinary), the version an operator on Debian gets.
//
// The contract:
//
//   - Every address is on 127.0.0.1, on TCP ports chosen free just before
//     the members start (a member keeps its ports across Kill and
//     Restart). Nothing listens on another interface, and no unix socket
//     is used (members over unix sockets hung in a trial).
//   - Data directories are under t.TempDir(); nothing outlives the test.
//     t.Cleanup closes every client Client made and stops every member
//     still running (an embedded one with Close, a binary by its PID).
//   - Logs go nowhere unless ETCDTEST_LOG=1, which sends the members'
//     logs to standard error; a binary's output is printed when the test
//     fails.
//   - Every wait is bounded (testkit.Patience unless said otherwise) and
//     ends as soon as what it waits for is observed: Start returns when
//     every member has reported ready (ReadyNotify), StartBinary when the
//     member answers a Status; none sleeps a fixed time.
//   - Kill stops a member and Restart brings it back with its data; a
//     member that comes back is ready only once a quorum is, so a test
//     that restarted members waits with Ready (or polls a read).
//   - EnableAuth creates the root user (RootPassword) and one role per
//     user, granting the prefixes of its Role, then turns authentication
//     on; from then on Client connects as root and ClientAs as a user.
//
// Methods that take no testing.TB (Kill, Restart, Endpoints) fail the
// test the cluster was started with, and like every method must be called
// from that test's goroutine.
package etcdtest
