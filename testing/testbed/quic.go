package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// QUIC backends (testbed/quicbackend): a QUIC server per backend that
// issues QUIC-LB connection IDs. The clients are package quicflow's.

// QUICPort is where a NAT VIP's QUIC backends listen; a DSR VIP's listen
// on the VIP's own port, QUICDSRPort, on the VIP their decapsulator
// delivers to.
const (
	QUICPort    = 4433
	QUICDSRPort = 443
)

// QUICResetKey is the stateless reset key every QUIC backend of a bed
// shares, as a deployment's servers do: a server that gets a packet of
// another's connection resets it.
const QUICResetKey = "vipd-testbed"

// QUICConfig is a QUIC-LB configuration of the bed: server IDs of two
// octets (QUICServerID), keyed when KeyFile is set (QUICKeyFile).
type QUICConfig struct {
	Rotation, NonceLen int
	KeyFile            string
}

// QUICServerID is backend i's (0-based) server ID in configuration rot, in
// hex: two octets, 0xa0+rot and i+1.
func QUICServerID(rot, i int) string { return fmt.Sprintf("%02x%02x", 0xa0+rot, i+1) }

// QUICKeyFile writes a QUIC-LB key (32 hex digits) for configuration rot
// into the bed's directory, readable by its owner only, and returns its
// path.
func (b *Bed) QUICKeyFile(rot int) string {
	b.t.Helper()
	p := filepath.Join(b.dir, fmt.Sprintf("quic-lb-%d.key", rot))
	key := fmt.Sprintf("%02xf726a9893ec05c0632d3956680baf0", rot)
	if err := os.WriteFile(p, []byte(key+"\n"), 0o600); err != nil {
		b.t.Fatalf("testbed: %v", err)
	}
	return p
}

// QUICSwitchFile is the file whose appearance moves backend be's server to
// its second QUIC-LB configuration.
func (be *Backend) QUICSwitchFile() string { return be.ctlFile("quic-switch") }

// StartQUIC runs backend i's QUIC server on QUICPort (for NAT VIPs) and,
// when dsrVIP is not empty, on dsrVIP:QUICDSRPort, issuing connection IDs
// of configs[0] (its server ID QUICServerID(rotation, i)) and of
// configs[1] once QUICSwitchFile exists.
func (be *Backend) StartQUIC(i int, dsrVIP string, configs ...QUICConfig) *exec.Cmd {
	listen := fmt.Sprintf(":%d", QUICPort)
	if dsrVIP != "" {
		listen += fmt.Sprintf(",%s:%d", dsrVIP, QUICDSRPort)
	}
	args := []string{"-name", be.Name, "-listen", listen, "-reset-key", QUICResetKey, "-switch-file", be.QUICSwitchFile()}
	for _, c := range configs {
		arg := fmt.Sprintf("%d:2:%d:%s", c.Rotation, c.NonceLen, QUICServerID(c.Rotation, i))
		if c.KeyFile != "" {
			arg += ":" + c.KeyFile
		}
		args = append(args, "-quiclb", arg)
	}
	return be.bed.Spawn(be.NS, "quic-"+be.Name, be.bed.Bin.QUICBackend, args...)
}

// QUICVIP is the configuration of a QUIC-LB VIP named name at vip (NAT
// on QUICPort, or DSR on QUICDSRPort) over the first n backends, with
// the configurations given, QUIC-LB on or off.
func QUICVIP(name, vip, mode string, n int, on bool, configs ...QUICConfig) string {
	port, bport := QUICPort, fmt.Sprintf("port = %d\n", QUICPort)
	if mode == "dsr" {
		port, bport = QUICDSRPort, ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n[[vip]]\nname = %q\naddress = %q\nport = %d\nprotocol = \"udp\"\nmode = %q\n", name, vip, port, mode)
	// No health check: the servers speak QUIC alone (a deployment would
	// check an HTTP or TCP port beside it).
	fmt.Fprintf(&b, "\n[vip.healthcheck]\ntype = \"none\"\n")
	fmt.Fprintf(&b, "\n[vip.quic_lb]\nenabled = %v\n", on)
	for _, c := range configs {
		fmt.Fprintf(&b, "\n[[vip.quic_lb.config]]\nrotation = %d\nserver_id_len = 2\nnonce_len = %d\n", c.Rotation, c.NonceLen)
		if c.KeyFile != "" {
			fmt.Fprintf(&b, "key_file = %q\n", c.KeyFile)
		}
	}
	for i := range n {
		var ids []string
		for _, c := range configs {
			ids = append(ids, fmt.Sprintf("%d = %q", c.Rotation, QUICServerID(c.Rotation, i)))
		}
		fmt.Fprintf(&b, "\n[[vip.backend]]\naddress = \"198.18.1.%d\"\n%squic_lb_server_ids = { %s }\n", 11+i, bport, strings.Join(ids, ", "))
	}
	return b.String()
}
