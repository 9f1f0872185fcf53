package xdpprog

import (
	"errors"
	"testing"

	"github.com/vipd/vipd/testing/nstest"
)

// TestInterfaceFeatures reads a veth's XDP features in a namespace: the
// driver's basic actions and redirect always, FeatureNDOXmit only while
// the peer runs an XDP program, the condition for frames an XDP program
// sends through the veth (XDP_TX, a redirect into it) to arrive.
func TestInterfaceFeatures(t *testing.T) {
	n := newNetNS(t)
	nstest.VethNamed(t, n, "fa", n, "fb")
	idx := n.Interface(t, "fa").Index
	features := func() Features {
		t.Helper()
		var f Features
		err := n.Do(func() (err error) { f, err = InterfaceFeatures(idx); return err })
		if errors.Is(err, ErrNoFeatures) {
			t.Skipf("%v", err)
		}
		if err != nil {
			t.Fatalf("InterfaceFeatures: %v", err)
		}
		return f
	}
	if f := features(); f&(FeatureBasic|FeatureRedirect) != FeatureBasic|FeatureRedirect || f&FeatureNDOXmit != 0 {
		t.Errorf("a veth whose peer runs no XDP program: features %#x, want basic and redirect, not ndo_xdp_xmit", uint64(f))
	}
	n.XDPPass(t, "fb")
	if f := features(); f&FeatureNDOXmit == 0 {
		t.Errorf("a veth whose peer runs an XDP program: features %#x, want ndo_xdp_xmit", uint64(f))
	}
	var err error
	if n.Do(func() error { _, err = InterfaceFeatures(1 << 30); return nil }); err == nil {
		t.Error("features of a missing interface: no error")
	}
}
