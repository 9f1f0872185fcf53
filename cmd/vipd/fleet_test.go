package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vipd/vipd/testing/etcdtest"
)

// TestFleetCommands: against a real etcd, push checks the document and
// writes it, a second push of the same is "unchanged", -n writes
// nothing, pull prints what was pushed, a document that fails
// validation is refused naming its line, and status with no live box
// says so.
func TestFleetCommands(t *testing.T) {
	c := etcdtest.Start(t, 1)
	dir := t.TempDir()
	local := filepath.Join(dir, "vipd.toml")
	src := "[dataplane]\ningress = \"eth0\"\n\n[fleet]\nendpoints = [\"http://" + strings.TrimPrefix(c.Endpoints()[0], "http://") + "\"]\nprefix = \"/vipd/fleets/test/\"\nbox = \"box1\"\n"
	shared := filepath.Join(dir, "shared.toml")
	doc := "flow_hash_seed = 12345\n\n[[vip]]\nname = \"web\"\naddress = \"198.18.0.100\"\nport = 80\nprotocol = \"tcp\"\n\n[[vip.backend]]\naddress = \"198.18.1.11\"\nport = 8080\n"
	bad := filepath.Join(dir, "bad.toml")
	shared2 := filepath.Join(dir, "shared2.toml")
	doc2 := doc + "\n[[vip.backend]]\naddress = \"198.18.1.12\"\nport = 8080\n"
	dead := filepath.Join(dir, "dead.toml")
	for path, content := range map[string]string{dead: "[dataplane]\ningress = \"eth0\"\n\n[fleet]\nendpoints = [\"http://127.0.0.1:1\"]\nprefix = \"/vipd/fleets/test/\"\n", local: src, shared: doc, shared2: doc2, bad: "flow_hash_seed = 1\n[admin]\nlisten = \"127.0.0.1:9180\"\n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"fleet", "status", "-config", local}, 0, "no live box", ""},
		{[]string{"fleet", "pull", "-config", local}, 1, "", "has no configuration yet"},
		{[]string{"fleet", "push", "-n", "-config", local, shared}, 0, "would replace the fleet's configuration (revision 0) with " + shared + ":\n  + vip \"web\"\n", ""},
		{[]string{"fleet", "pull", "-config", local}, 1, "", "has no configuration yet"},
		{[]string{"fleet", "push", "-config", local, bad}, 1, "", "bad.toml:2"},
		{[]string{"fleet", "push", "-config", local, shared}, 0, "pushed " + shared + " as revision", ""},
		{[]string{"fleet", "push", "-config", local, shared}, 0, "unchanged", ""},
		{[]string{"fleet", "pull", "-config", local}, 0, "flow_hash_seed = 12345", ""},
		{[]string{"fleet", "push", "-config", local, shared2}, 0, "  + backend 198.18.1.12:8080 of vip \"web\"\n", ""},
		{[]string{"fleet", "nonsense", "-config", local}, 2, "", "usage: vipd fleet"},
		{[]string{"fleet", "status", "-timeout", "300ms", "-config", dead}, 1, "", "etcd (http://127.0.0.1:1) did not answer within 300ms"},
		{[]string{"drain", "-fleet", "-timeout", "300ms", "-config", dead, "web", "198.18.1.11"}, 1, "", "etcd (http://127.0.0.1:1) did not answer within 300ms"},

		// The fleet's overrides: named as vipd status names backends,
		// one per backend, undone only by their own kind.
		{[]string{"drain", "-fleet", "-config", local, "-reason", "kernel update", "web", "198.18.1.11"}, 0, "web 198.18.1.11:8080: drain written to the fleet (revision", ""},
		{[]string{"enable", "-fleet", "-config", local, "web", "198.18.1.11"}, 1, "", "the fleet's override is drain, not disabled"},
		{[]string{"drain", "-fleet", "-undo", "-wait", "-config", local, "web", "198.18.1.11:8080"}, 0, "the fleet's drain undone", ""},
		{[]string{"drain", "-fleet", "-undo", "-config", local, "web", "198.18.1.11"}, 0, "nothing to undo", ""},
		{[]string{"weight", "-fleet", "-config", local, "web", "198.18.1.12", "5"}, 0, "web 198.18.1.12:8080: weight 5 written", ""},
		{[]string{"weight", "-fleet", "-config", local, "web", "198.18.1.12", "-reset"}, 0, "the fleet's weight undone", ""},
		{[]string{"disable", "-fleet", "-config", local, "web", "198.18.1.99"}, 1, "", "198.18.1.99"},
		{[]string{"disable", "-fleet", "-config", local, "api", "198.18.1.11"}, 1, "", "api"},
		{[]string{"drain", "-wait", "web", "198.18.1.11"}, 2, "", "-wait goes with -fleet"},
		{[]string{"disable", "-fleet", "-wait", "-timeout", "300ms", "-config", local, "web", "198.18.1.11"}, 1, "web 198.18.1.11:8080: disabled written", "not applied by: lagging"},
	} {
		if tc.stderr == "not applied by: lagging" {
			// A live box that never applies: its key at revision 1.
			if _, err := c.Client(t).Put(t.Context(), "/vipd/fleets/test/boxes/lagging", `{"box":"lagging","revision":1}`); err != nil {
				t.Fatal(err)
			}
		}
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("vipd %s: exit %d\n%s%s\nwant exit %d, stdout with %q, stderr with %q", strings.Join(tc.args, " "), code, &stdout, &stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
}
