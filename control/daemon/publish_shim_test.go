package daemon

import "github.com/vipd/vipd/control"

// benchHealthEvent reports a health change and returns once it is
// published: what the publisher does when it is idle, without the wake-up.
func benchHealthEvent(d *Daemon, ref uint32, st control.Status) {
	d.setHealth(ref, st, !st.Down, true)
	d.flushPending()
}
