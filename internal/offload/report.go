package offload

import "fmt"

// Report is what Check found out about one interface.
type Report struct {
	// Interface is the interface checked, in the caller's namespace.
	Interface string
	// IsVeth tells whether it is a veth. The other fields are zero
	// (PeerNetNSID -1) when it is not.
	IsVeth bool
	// PeerIndex is the peer's interface index in the peer's own namespace
	// (IFLA_LINK); 0 when the veth has no peer (being torn down).
	PeerIndex int
	// PeerNetNSID is the id this namespace gives the peer's namespace
	// (IFLA_LINK_NETNSID), or -1 when the peer is in this namespace.
	PeerNetNSID int
	// PeerNetNS says where the peer is: "" in this namespace; else the
	// "ip netns" name of its namespace, or when it has none a path that
	// nsenter --net= accepts (/proc/PID/ns/net of a process in it, such as
	// a container's); "" too when the namespace was not found.
	PeerNetNS string
	// PeerReachable tells whether Check could read the peer's settings.
	// When it is false, Unreachable says why.
	PeerReachable bool
	Unreachable   string
	// PeerName is the peer's name in its namespace ("" when unreachable).
	PeerName string
	// PeerTxChecksum tells whether the peer has TX checksum offload on,
	// which breaks vipd's NAT for what the peer sends (see the package
	// documentation). Meaningful only when PeerReachable.
	PeerTxChecksum bool
}

// OK tells whether nothing needs doing: the interface is not a veth, or its
// peer was read and has TX checksum offload off.
func (r Report) OK() bool {
	return !r.IsVeth || r.PeerReachable && !r.PeerTxChecksum
}

// FixCommand is the shell command that turns TX checksum offload off on
// the peer, run on the host; "" when the peer was not found.
func (r Report) FixCommand() string {
	switch {
	case !r.IsVeth || r.PeerName == "":
		return ""
	case r.PeerNetNSID < 0:
		return "ethtool -K " + r.PeerName + " tx off"
	case r.PeerNetNS == "":
		return ""
	case r.PeerNetNS[0] == '/':
		return "nsenter --net=" + r.PeerNetNS + " ethtool -K " + r.PeerName + " tx off"
	default:
		return "ip netns exec " + r.PeerNetNS + " ethtool -K " + r.PeerName + " tx off"
	}
}

// consequence is what goes wrong, in the words of a warning.
const consequence = "frames it sends reach vipd with partial checksums, NAT forwards TCP segments with wrong checksums and those connections hang without any drop being counted"

// Warning returns "" when the report is OK, else a one-line warning for
// vipd's log that says what is wrong and the command that fixes it.
func (r Report) Warning() string {
	if r.OK() {
		return ""
	}
	if !r.PeerReachable {
		return fmt.Sprintf("%s is a veth whose peer (ifindex %d, netns id %d) vipd cannot check (%s); "+
			"if that peer has TX checksum offload on, %s: turn it off in the peer's namespace "+
			"(ip netns exec NAME ethtool -K PEER tx off, or for a container nsenter -t PID -n ethtool -K PEER tx off)",
			r.Interface, r.PeerIndex, r.PeerNetNSID, r.Unreachable, consequence)
	}
	where := "in this namespace"
	if r.PeerNetNSID >= 0 {
		where = "in netns " + r.PeerNetNS
	}
	return fmt.Sprintf("%s is a veth whose peer %s (%s) has TX checksum offload on: %s; fix: %s",
		r.Interface, r.PeerName, where, consequence, r.FixCommand())
}

// Finding is one interface that CheckInterfaces says needs the operator.
type Finding struct {
	Interface string
	// Warning is the one-line warning: Report.Warning, or that the
	// interface could not be checked (Err).
	Warning string
	// Fix is the command that fixes it, "" when not known.
	Fix string
	// Err is set when the kernel could not be asked at all.
	Err error
}

// CheckInterfaces checks each of names (Check) and returns a Finding for
// each that needs the operator: a veth whose peer has TX checksum offload
// on or cannot be checked, or an interface Check could not ask about.
// vipd logs them at start and vipd -check-host prints them: one wording,
// one fix, wherever they are read.
func CheckInterfaces(names []string) []Finding {
	var out []Finding
	for _, name := range names {
		r, err := Check(name)
		switch {
		case err != nil:
			out = append(out, Finding{Interface: name, Err: err,
				Warning: fmt.Sprintf("could not check %s for TX checksum offload on a veth peer: %v", name, err)})
		case !r.OK():
			out = append(out, Finding{Interface: name, Warning: r.Warning(), Fix: r.FixCommand()})
		}
	}
	return out
}
