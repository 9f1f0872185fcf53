package offload

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIoctlSocketInNotANamespace checks that a handle that is not a
// network namespace gives an error, not a socket somewhere else.
func TestIoctlSocketInNotANamespace(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fd, err := ioctlSocketIn(f); err == nil {
		unix.Close(fd)
		t.Fatal("ioctlSocketIn(/dev/null) opened a socket")
	}
}

// threadsIn fails the test unless every thread of the process is in the
// network namespace want (a stat of a /proc/.../ns/net).
func threadsIn(t *testing.T, want unix.Stat_t) {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		var st unix.Stat_t
		if err := unix.Stat("/proc/self/task/"+task.Name()+"/ns/net", &st); err != nil {
			continue // the thread has exited
		}
		if st.Dev != want.Dev || st.Ino != want.Ino {
			t.Errorf("thread %s is in another network namespace", task.Name())
		}
	}
}
