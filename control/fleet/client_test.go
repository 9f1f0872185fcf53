package fleet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/control/config"
	"github.com/vipd/vipd/testing/etcdtest"
	"github.com/vipd/vipd/testing/testkit"
)

// TestNewClient: a client made from [fleet] reaches the cluster as its
// user; a wrong password is refused; a CA file that holds no certificate
// is an error that names it.
func TestNewClient(t *testing.T) {
	c := etcdtest.Start(t, 1)
	c.EnableAuth(t, map[string]etcdtest.Role{"box1": {Password: "box-secret", Read: []string{testPrefix}}})
	f := &config.Fleet{Endpoints: c.Endpoints(), Prefix: testPrefix, DialTimeout: config.Duration(2 * time.Second), User: "box1", Password: config.Key("box-secret")}
	cli, err := NewClient(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Patience)
	defer cancel()
	if _, _, err := (&EtcdStore{Client: cli, Prefix: testPrefix}).Get(ctx); err != nil {
		t.Errorf("the box's client cannot read the fleet: %v", err)
	}
	f.Password = config.Key("wrong")
	if bad, err := NewClient(f); err == nil {
		_, _, err = (&EtcdStore{Client: bad, Prefix: testPrefix}).Get(ctx)
		bad.Close()
		if err == nil {
			t.Error("a wrong password was let in")
		}
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.CAFile = ca
	if _, err := NewClient(f); err == nil || !strings.Contains(err.Error(), ca) {
		t.Errorf("a CA file without a certificate: %v", err)
	}
}
