// Package health runs active health checks (TCP connect, HTTP GET) against
// backends with interval, timeout, rise and fall, and manages draining (lame
// duck) and slow start. It never touches packets; state changes become new
// dataplane snapshots.
package health
