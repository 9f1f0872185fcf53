package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vipd/vipd/hashing"
)

// base is a minimal valid file; cases append to it or replace parts of
// it.
var base = fixture("base.toml")

// fixture returns the file testdata/name (a package-level variable's
// value, so it panics rather than fail a test).
func fixture(name string) string {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// markLine returns the 1-based line of the first line containing "#!", the
// marker test cases put on the line an error must point at.
func markLine(t *testing.T, src string) int {
	t.Helper()
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, "#!") {
			return i + 1
		}
	}
	t.Fatalf("test case has no #! marker line:\n%s", src)
	return 0
}

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		key  string // key path the problem must name
		msg  string // fragment of the message
	}{
		{"unknown top-level key", "verbose = true #!\n" + base, "verbose", `unknown key "verbose"`},
		{"misspelt key suggests", strings.Replace(base, `port = 80`, `prot = 80 #!`, 1), "vip[0].prot", `did you mean "port"`},
		{"unknown key in healthcheck", base + "\n[vip.healthcheck]\nintervall = \"1s\" #!\n", "vip[0].healthcheck.intervall", `did you mean "interval"`},
		{"unknown key in second backend", strings.Replace(base, "address = \"198.18.1.12\"", "address = \"198.18.1.12\"\nwieght = 3 #!", 1), "vip[0].backend[1].wieght", `did you mean "weight"`},
		{"missing ingress", strings.Replace(base, "[dataplane]\ningress = \"eth0\"", "[dataplane] #!\negress = \"eth1\"", 1), "dataplane.ingress", "required"},
		{"bad interface name", strings.Replace(base, `ingress = "eth0"`, `ingress = "eth0/1" #!`, 1), "dataplane.ingress", "character"},
		{"bad io", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nio = \"dpdk\" #!", 1), "dataplane.io", `not "dpdk"`},
		{"ring not power of two", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nrx_ring_size = 1000 #!", 1), "dataplane.rx_ring_size", "power of two"},
		{"frame size", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nframe_size = 1500 #!", 1), "dataplane.frame_size", "2048 or 4096"},
		{"frames fewer than fill ring", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nframe_count = 1024 #!", 1), "dataplane.frame_count", "cannot fill"},
		{"batch larger than ring", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nrx_ring_size = 64\nbatch_size = 128 #!", 1), "dataplane.batch_size", "larger than rx_ring_size"},
		{"zero queues", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nqueues = 0 #!", 1), "dataplane.queues", "from 1 to"},
		{"no fast path flows", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nfast_path_flows = 0 #!", 1), "dataplane.fast_path_flows", "from 1 to 4194304 flows, not 0"},
		{"negative IPv6 fast path flows", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nfast_path_flows6 = -1 #!", 1), "dataplane.fast_path_flows6", "from 0 (no IPv6 in the fast path) to 4194304 flows, not -1"},
		{"too many IPv6 fast path flows", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nfast_path_flows6 = 4194305 #!", 1), "dataplane.fast_path_flows6", "not 4194305"},
		{"fast path refresh too short", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nfast_path_refresh = \"10ms\" #!", 1), "dataplane.fast_path_refresh", "at least 100ms"},
		{"fast path refresh past closing", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nfast_path = true\nfast_path_refresh = \"30s\" #!", 1), "dataplane.fast_path_refresh", "not shorter than the shortest conntrack timeout of a flow past its handshake (30s)"},
		{"negative busy poll", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nbusy_poll_usecs = -1 #!", 1), "dataplane.busy_poll_usecs", "must be 0 (off) or from 1 to 1000 microseconds, not -1"},
		{"absurd busy poll", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nbusy_poll_usecs = 5000000 #!", 1), "dataplane.busy_poll_usecs", "not 5000000"},
		{"negative busy poll budget", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nbusy_poll_usecs = 50\nbusy_poll_budget = -8 #!", 1), "dataplane.busy_poll_budget", "must be 0 (batch_size) or from 1 to 1024 frames, not -8"},
		{"absurd busy poll budget", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nbusy_poll_usecs = 50\nbusy_poll_budget = 65536 #!", 1), "dataplane.busy_poll_budget", "not 65536"},
		{"busy poll budget over the ring", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nrx_ring_size = 256\nbusy_poll_usecs = 50\nbusy_poll_budget = 512 #!", 1), "dataplane.busy_poll_budget", "larger than rx_ring_size (256)"},
		{"xdp mode", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nxdp_mode = \"offload\" #!", 1), "dataplane.xdp_mode", `not "offload"`},
		{"neighbor role", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nneighbor_role = \"backup\" #!", 1), "dataplane.neighbor_role", `must be "active" or "standby", not "backup"`},
		{"egress mtu too small for IPv6 DSR", "[dataplane]\ningress = \"eth0\"\negress_mtu = 1300 #!\n[[vip]]\nname = \"v6\"\naddress = \"2001:2::100\"\nport = 80\nmode = \"dsr\"\nencap_source = \"2001:2:1::1\"\n[[vip.backend]]\naddress = \"2001:2:1::11\"\n", "dataplane.egress_mtu", "from 1320"},
		{"egress mtu too small", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\negress_mtu = 500 #!", 1), "dataplane.egress_mtu", "from 576"},
		{"string where integer", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nqueues = \"two\" #!", 1), "dataplane.queues", `not the string "two"`},
		{"negative port out of range", strings.Replace(base, `port = 80`, `port = 70000 #!`, 1), "vip[0].port", "from 0 to 65535"},
		{"conntrack capacity", base + "\n[conntrack]\ncapacity = 10 #!\n", "conntrack.capacity", "from 1024"},
		{"bad duration", base + "\n[conntrack]\nudp_timeout = \"soon\" #!\n", "conntrack.udp_timeout", "invalid duration"},
		{"duration too short", base + "\n[conntrack]\ntcp_closing_timeout = \"10ms\" #!\n", "conntrack.tcp_closing_timeout", "from 1s"},
		{"unconfirmed too long", base + "\n[conntrack]\ntcp_unconfirmed_timeout = \"200h\" #!\n", "conntrack.tcp_unconfirmed_timeout", "to 168h"},
		{"admin not host:port", base + "\n[admin]\nlisten = \"9180\" #!\n", "admin.listen", "host:port"},
		{"admin host name", base + "\n[admin]\nlisten = \"example.com:9180\" #!\n", "admin.listen", "IP address or localhost"},
		{"admin socket relative", base + "\n[admin]\nsocket = \"run/admin.sock\" #!\n", "admin.socket", "absolute path"},
		{"admin socket a directory", base + "\n[admin]\nsocket = \"/run/vipd/\" #!\n", "admin.socket", "clean path of a file"},
		{"admin socket unclean", base + "\n[admin]\nsocket = \"/run/../run/vipd.sock\" #!\n", "admin.socket", "clean path"},
		{"admin socket too long", base + "\n[admin]\nsocket = \"/" + strings.Repeat("s", 107) + "\" #!\n", "admin.socket", "at most 107"},
		{"admin socket not a string", base + "\n[admin]\nsocket = 1 #!\n", "admin.socket", "must be a string"},
		{"allowed host empty", base + "\n[admin]\nallowed_hosts = [\"a.example\", \"\"] #!\n", "admin.allowed_hosts[1]", "not empty"},
		{"allowed host a URL", base + "\n[admin]\nallowed_hosts = [\"http://lb1.example.net\"] #!\n", "admin.allowed_hosts[0]", "not a URL"},
		{"allowed host with a path", base + "\n[admin]\nallowed_hosts = [\"lb1.example.net/metrics\"] #!\n", "admin.allowed_hosts[0]", "without a path"},
		{"allowed host with a port", base + "\n[admin]\nallowed_hosts = [\"lb1.example.net:9180\"] #!\n", "admin.allowed_hosts[0]", "without a port"},
		{"allowed host a wildcard", base + "\n[admin]\nallowed_hosts = [\"*.example.net\"] #!\n", "admin.allowed_hosts[0]", "wildcards"},
		{"allowed host with a space", base + "\n[admin]\nallowed_hosts = [\"lb1 example\"] #!\n", "admin.allowed_hosts[0]", "not a letter"},
		{"allowed host empty label", base + "\n[admin]\nallowed_hosts = [\"lb1..example\"] #!\n", "admin.allowed_hosts[0]", "labels of 1 to 63"},
		{"allowed host label with a dash", base + "\n[admin]\nallowed_hosts = [\"-lb1.example\"] #!\n", "admin.allowed_hosts[0]", "start or end with '-'"},
		{"allowed host too long", base + "\n[admin]\nallowed_hosts = [\"" + strings.Repeat("a.", 127) + "ab\"] #!\n", "admin.allowed_hosts[0]", "at most 253"},
		{"allowed hosts not strings", base + "\n[admin]\nallowed_hosts = [1] #!\n", "admin.allowed_hosts[0]", "must be a string"},
		{"allowed hosts not an array", base + "\n[admin]\nallowed_hosts = \"lb1.example.net\" #!\n", "admin.allowed_hosts", "must be an array"},
		{"allowed host on the second line", base + "\n[admin]\nallowed_hosts = [ #!\n  \"lb1.example.net\",\n  \"lb1.example.net:80\",\n]\n", "admin.allowed_hosts[1]", "without a port"},
		{"pprof without the socket", base + "\n[admin]\nsocket = \"\"\npprof = true #!\n", "admin.pprof", "admin socket only"},
		{"pprof not a boolean", base + "\n[admin]\npprof = \"yes\" #!\n", "admin.pprof", "must be true or false"},
		{"pprof misspelt", base + "\n[admin]\nprof = true #!\n", "admin.prof", `did you mean "pprof"`},
		{"bad VIP address", strings.Replace(base, `address = "198.18.0.100"`, `address = "198.18.0.300" #!`, 1), "vip[0].address", "198.18.0.300"},
		{"missing VIP address", strings.Replace(strings.Replace(base, "\naddress = \"198.18.0.100\"", "", 1), "[[vip]]", "[[vip]] #!", 1), "vip[0].address", "required"},
		{"multicast VIP", strings.Replace(base, `address = "198.18.0.100"`, `address = "224.0.0.1" #!`, 1), "vip[0].address", "not a unicast"},
		{"missing name", strings.Replace(strings.Replace(base, "\nname = \"web\"", "", 1), "[[vip]]", "[[vip]] #!", 1), "vip[0].name", "required"},
		{"bad name", strings.Replace(base, `name = "web"`, `name = "web site" #!`, 1), "vip[0].name", "letters, digits"},
		{"bad protocol", strings.Replace(base, `port = 80`, "port = 80\nprotocol = \"sctp\" #!", 1), "vip[0].protocol", `not "sctp"`},
		{"bad mode", strings.Replace(base, `port = 80`, "port = 80\nmode = \"tunnel\" #!", 1), "vip[0].mode", `not "tunnel"`},
		{"bad scheduler", strings.Replace(base, `port = 80`, "port = 80\nscheduler = \"rr\" #!", 1), "vip[0].scheduler", `must be one of "maglev", "maglev_bounded", "wrr", "lc", "p2c", not "rr"`},
		{"load bound not over 1", strings.Replace(base, `port = 80`, "port = 80\nscheduler = \"maglev_bounded\"\nload_bound = 0.9 #!", 1), "vip[0].load_bound", "more than 1"},
		{"load report with tcp", base + "\n[vip.healthcheck]\nload_report = true #!\n", "vip[0].healthcheck.load_report", `only applies to type = "http"`},
		{"bad load header", base + "\n[vip.healthcheck]\ntype = \"http\"\nload_report = true\nload_header = \"X Load\" #!\n", "vip[0].healthcheck.load_header", "header name"},
		{"bad error penalty", base + "\n[vip.healthcheck]\ntype = \"http\"\nerror_penalty = 1.5 #!\n", "vip[0].healthcheck.error_penalty", "from 0 to 1"},
		{"bad min weight", base + "\n[vip.healthcheck]\ntype = \"http\"\nmin_weight_percent = 0 #!\n", "vip[0].healthcheck.min_weight_percent", "from 1 to 100"},
		{"bad half-life", base + "\n[vip.healthcheck]\ntype = \"http\"\nload_half_life = \"0s\" #!\n", "vip[0].healthcheck.load_half_life", "from 1ns to 1h"},
		{"bad flow hash", strings.Replace(base, `port = 80`, "port = 80\nflow_hash = \"dst_ip\" #!", 1), "vip[0].flow_hash", `not "dst_ip"`},
		{"table not prime", strings.Replace(base, `port = 80`, "port = 80\ntable_size = 65536 #!", 1), "vip[0].table_size", "not prime"},
		{"table too small", strings.Replace(base, `port = 80`, "port = 80\ntable_size = 13 #!", 1), "vip[0].table_size", "too small for 2 backends"},
		{"table too large", strings.Replace(base, `port = 80`, "port = 80\ntable_size = 16777259 #!", 1), "vip[0].table_size", "at most"},
		{"encap in NAT", strings.Replace(base, `port = 80`, "port = 80\nencap = \"gue\" #!", 1), "vip[0].encap", `only applies to mode = "dsr"`},
		{"unknown encap", strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"\nencap = \"vxlan\" #!", 1), "vip[0].encap", `not "vxlan"`},
		{"gue port without gue", strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"\ngue_port = 7000 #!", 1), "vip[0].gue_port", `only applies to encap = "gue"`},
		{"gue port zero", strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"\nencap = \"gue\"\ngue_port = 0 #!", 1), "vip[0].gue_port", "1-65535"},
		{"previous owner on nat", strings.Replace(base, `port = 80`, "port = 80\nprevious_owner = true #!", 1), "vip[0].previous_owner", `needs mode = "dsr" with encap = "gue"`},
		{"previous owner on ipip", strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"\nprevious_owner = true #!", 1), "vip[0].previous_owner", `needs mode = "dsr" with encap = "gue"`},
		{"previous owner ttl zero", strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"\nencap = \"gue\"\nprevious_owner = true\nprevious_owner_ttl = \"0s\" #!", 1), "vip[0].previous_owner_ttl", "from 1s to 168h"},
		{"previous owner ttl without it", strings.Replace(base, `port = 80`, "port = 80\nprevious_owner_ttl = \"2h\" #!", 1), "vip[0].previous_owner_ttl", "only applies with previous_owner"},
		{"previous owner udp on tcp", strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"\nencap = \"gue\"\nprevious_owner = true\nprevious_owner_udp = true #!", 1), "vip[0].previous_owner_udp", "only applies to a UDP VIP"},
		{"source prefix with gue", strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"\nencap = \"gue\"\nencap_source_prefix = \"198.18.1.0/24\" #!", 1), "vip[0].encap_source_prefix", `encap = "ipip"`},
		{"source prefix in NAT", strings.Replace(base, `port = 80`, "port = 80\nencap_source_prefix = \"198.18.1.0/24\" #!", 1), "vip[0].encap_source_prefix", `only applies to mode = "dsr"`},
		{"source prefix host bits", strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"\nencap_source_prefix = \"198.18.1.7/24\" #!", 1), "vip[0].encap_source_prefix", "write 198.18.1.0/24"},
		{"source prefix family", strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"\nencap_source_prefix = \"2001:db8::/64\" #!", 1), "vip[0].encap_source_prefix", "address family"},
		{"source prefix of one address", strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"\nencap_source_prefix = \"198.18.1.1/32\" #!", 1), "vip[0].encap_source_prefix", "single address"},
		{"source prefix without the source", strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"\nencap_source = \"198.18.2.1\"\nencap_source_prefix = \"198.18.1.0/24\" #!", 1), "vip[0].encap_source_prefix", "does not contain encap_source 198.18.2.1"},
		{"tunnel probe on a NAT VIP", base + "\n[vip.healthcheck]\nprobe = \"tunnel\" #!\n", "vip[0].healthcheck.probe", `only applies to mode = "dsr"`},
		{"unknown probe", base + "\n[vip.healthcheck]\nprobe = \"icmp\" #!\n", "vip[0].healthcheck.probe", `must be "tunnel" or "direct", not "icmp"`},
		{"bad source prefix", strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"\nencap_source_prefix = \"198.18.1.0/33\" #!", 1), "vip[0].encap_source_prefix", ""},
		{"egress mtu too small for IPv6 GUE", "[dataplane]\ningress = \"eth0\"\negress_mtu = 1320 #!\n[[vip]]\nname = \"v6\"\naddress = \"2001:2::100\"\nport = 80\nmode = \"dsr\"\nencap = \"gue\"\nprevious_owner = false\nencap_source = \"2001:2:1::1\"\n[[vip.backend]]\naddress = \"2001:2:1::11\"\n", "dataplane.egress_mtu", "from 1328"},
		// previous_owner, on by default with GUE: a hinted packet carries
		// 24 bytes more.
		{"egress mtu too small for IPv6 GUE hints", "[dataplane]\ningress = \"eth0\"\negress_mtu = 1328 #!\n[[vip]]\nname = \"v6\"\naddress = \"2001:2::100\"\nport = 80\nmode = \"dsr\"\nencap = \"gue\"\nencap_source = \"2001:2:1::1\"\n[[vip.backend]]\naddress = \"2001:2:1::11\"\n", "dataplane.egress_mtu", "from 1352"},
		{"outlier on UDP", strings.Replace(base, `port = 80`, "port = 80\nprotocol = \"udp\"", 1) + "\n[vip.outlier]\nenabled = true #!\n", "vip[0].outlier.enabled", "needs protocol"},
		{"outlier ratio", base + "\n[vip.outlier]\nenabled = true\nfailure_ratio = 1.5 #!\n", "vip[0].outlier.failure_ratio", "in (0, 1]"},
		{"outlier ratio not a number", base + "\n[vip.outlier]\nenabled = true\nfailure_ratio = \"half\" #!\n", "vip[0].outlier.failure_ratio", "must be a number"},
		{"outlier window", base + "\n[vip.outlier]\nenabled = true\nwindow = \"100ms\" #!\n", "vip[0].outlier.window", "from 1s"},
		{"outlier max below base", base + "\n[vip.outlier]\nenabled = true\nbase_ejection = \"1m\"\nmax_ejection = \"30s\" #!\n", "vip[0].outlier.max_ejection", "shorter than base_ejection"},
		{"outlier percent", base + "\n[vip.outlier]\nenabled = true\nmax_ejected_percent = 0 #!\n", "vip[0].outlier.max_ejected_percent", "from 1 to 100"},
		{"outlier min", base + "\n[vip.outlier]\nenabled = true\nmin_handshakes = 0 #!\n", "vip[0].outlier.min_handshakes", "at least 1"},
		{"encap source in NAT", strings.Replace(base, `port = 80`, "port = 80\nencap_source = \"198.18.1.1\" #!", 1), "vip[0].encap_source", `only applies to mode = "dsr"`},
		{"mixed families", strings.Replace(base, `address = "198.18.1.12"`, `address = "2001:db8::12" #!`, 1), "vip[0].backend[1].address", "mixes address families"},
		{"encap source family", strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"\nencap_source = \"2001:db8::1\" #!", 1), "vip[0].encap_source", "address family"},
		{"duplicate backend", strings.Replace(base, `address = "198.18.1.12"`, `address = "198.18.1.11" #!`, 1), "vip[0].backend[1].address", "duplicate backend 198.18.1.11:8080"},
		// Port 0 is the VIP's port, 80: the same endpoint written twice.
		{"duplicate backend, one on the VIP's port", strings.Replace(strings.Replace(base, "port = 8080", "port = 80", 1), "address = \"198.18.1.12\"\nport = 8080", "address = \"198.18.1.11\" #!", 1), "vip[0].backend[1].address", "duplicate backend 198.18.1.11:80"},
		{"port rewrite in DSR", strings.Replace(strings.Replace(base, `port = 80`, "port = 80\nmode = \"dsr\"", 1), "port = 8080\n\n", "port = 8080 #!\n\n", 1), "vip[0].backend[0].port", "DSR cannot rewrite ports"},
		{"port rewrite on all-port VIP", strings.Replace(strings.Replace(base, `port = 80`, "port = 0", 1), "port = 8080\n\n", "port = 8080 #!\n\n", 1), "vip[0].backend[0].port", "every port"},
		{"weight zero", strings.Replace(base, "port = 8080\n\n", "port = 8080\nweight = 0 #!\n\n", 1), "vip[0].backend[0].weight", "0 is not a weight"},
		{"weight too large", strings.Replace(base, "port = 8080\n\n", "port = 8080\nweight = 5000 #!\n\n", 1), "vip[0].backend[0].weight", "from 1 to 1000"},
		{"bad backend state", strings.Replace(base, "port = 8080\n\n", "port = 8080\nstate = \"down\" #!\n\n", 1), "vip[0].backend[0].state", `not "down"`},
		{"no active backend", strings.Replace(strings.Replace(base, "[[vip.backend]]", "[[vip.backend]] #!", 1), "port = 8080\n", "port = 8080\nstate = \"disabled\"\n", -1), "vip[0].backend", `no backend has state = "active"`},
		{"no backends at all", "[dataplane]\ningress = \"eth0\"\n[[vip]] #!\nname = \"web\"\naddress = \"198.18.0.100\"\n", "vip[0].backend", "at least one"},
		{"duplicate VIP", base + "\n[[vip]]\nname = \"web2\"\naddress = \"198.18.0.100\" #!\nport = 80\n[[vip.backend]]\naddress = \"198.18.1.20\"\n", "vip[1].address", "overlaps vip[0]"},
		{"all-port VIP overlaps", base + "\n[[vip]]\nname = \"all\"\naddress = \"198.18.0.100\" #!\n[[vip.backend]]\naddress = \"198.18.1.20\"\n", "vip[1].address", "port 0 means every port"},
		{"duplicate VIP name", base + "\n[[vip]]\nname = \"web\" #!\naddress = \"198.18.0.101\"\n[[vip.backend]]\naddress = \"198.18.1.20\"\n", "vip[1].name", "duplicate VIP name"},
		{"NAT reply ambiguity", base + "\n[[vip]]\nname = \"web2\"\naddress = \"198.18.0.101\"\nport = 80\n[[vip.backend]]\naddress = \"198.18.1.11\" #!\nport = 8080\n", "vip[1].backend[0].address", "replies could belong to either VIP"},
		{"backend is a VIP", base + "\n[[vip]]\nname = \"web2\"\naddress = \"198.18.0.101\"\nport = 80\n[[vip.backend]]\naddress = \"198.18.0.100\" #!\n", "vip[1].backend[0].address", "another VIP's address"},
		{"check type", base + "\n[vip.healthcheck]\ntype = \"icmp\" #!\n", "vip[0].healthcheck.type", `not "icmp"`},
		{"check timeout over interval", base + "\n[vip.healthcheck]\ninterval = \"1s\"\ntimeout = \"2s\" #!\n", "vip[0].healthcheck.timeout", "longer than the interval"},
		{"check rise", base + "\n[vip.healthcheck]\nrise = 0 #!\n", "vip[0].healthcheck.rise", "from 1 to 100"},
		{"check fall", base + "\n[vip.healthcheck]\nfall = 1000 #!\n", "vip[0].healthcheck.fall", "from 1 to 100"},
		{"check path", base + "\n[vip.healthcheck]\ntype = \"http\"\npath = \"healthz\" #!\n", "vip[0].healthcheck.path", "must start with '/'"},
		{"check slow start negative", base + "\n[vip.healthcheck]\nslow_start = \"-5s\" #!\n", "vip[0].healthcheck.slow_start", "from 0s"},
		{"check on_all_down", base + "\n[vip.healthcheck]\non_all_down = \"panic\" #!\n", "vip[0].healthcheck.on_all_down", `not "panic"`},
		{"check init_state", base + "\n[vip.healthcheck]\ninit_state = \"unknown\" #!\n", "vip[0].healthcheck.init_state", `must be "down" or "up", not "unknown"`},
		{"drain status on tcp check", base + "\n[vip.healthcheck]\ndrain_status = 503 #!\n", "vip[0].healthcheck.drain_status", `only applies to type = "http"`},
		{"drain header without status", base + "\n[vip.healthcheck]\ntype = \"http\"\ndrain_header = \"X-Drain\" #!\n", "vip[0].healthcheck.drain_header", "needs drain_status"},
		{"check port needed", strings.Replace(strings.Replace(base, `port = 80`, "port = 0", 1), "port = 8080\n", "", -1) + "[vip.healthcheck] #!\n", "vip[0].healthcheck.port", "no port to probe"},
		{"healthcheck not a table", strings.Replace(base, `port = 80`, "port = 80\nhealthcheck = 5 #!", 1), "vip[0].healthcheck", "must be a table"},
		{"syntax error", base + "\n[vip.backend #!\n", "vip.backend", "expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse("test.toml", []byte(tt.src))
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse: got %v, want *Errors", err)
			}
			wantLine := markLine(t, tt.src)
			for _, p := range errs.Problems {
				if p.Key == tt.key && strings.Contains(p.Msg, tt.msg) {
					if p.File != "test.toml" {
						t.Errorf("problem names file %q, want test.toml", p.File)
					}
					if p.Line != wantLine {
						t.Errorf("problem %q points at line %d, want %d", p, p.Line, wantLine)
					}
					if s := p.String(); !strings.HasPrefix(s, "test.toml:") || (tt.key != "" && !strings.Contains(s, tt.key)) {
						t.Errorf("message %q does not name file and key", s)
					}
					return
				}
			}
			t.Errorf("no problem with key %q and message containing %q; got:\n%v", tt.key, tt.msg, err)
		})
	}
}

func TestAllErrorsReportedAtOnce(t *testing.T) {
	src := `
[dataplane]
io = "dpdk"
queues = "many"
[[vip]]
name = "a b"
address = "nope"
[[vip.backend]]
address = "198.18.1.1"
weight = 0
colour = "red"
`
	_, _, err := Parse("multi.toml", []byte(src))
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("want *Errors, got %v", err)
	}
	want := []string{"dataplane.ingress", "dataplane.io", "dataplane.queues", "vip[0].name", "vip[0].address",
		"vip[0].backend[0].weight", "vip[0].backend[0].colour"}
	for _, k := range want {
		found := false
		for _, p := range errs.Problems {
			found = found || p.Key == k
		}
		if !found {
			t.Errorf("no problem reported for %s; got:\n%v", k, err)
		}
	}
	for i := 1; i < len(errs.Problems); i++ {
		a, b := errs.Problems[i-1].Line, errs.Problems[i].Line
		if a > b && b != 0 {
			t.Errorf("problems not sorted by line: %d before %d", a, b)
		}
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name, src, key, msg string
	}{
		{"small table", strings.Replace(base, `port = 80`, "port = 80\ntable_size = 101", 1), "vip[0].table_size", "under 100×"},
		{"public admin", base + "\n[admin]\nlisten = \"0.0.0.0:9180\"\n", "admin.listen", "not a loopback"},
		{"allowed host an IPv4 address", base + "\n[admin]\nallowed_hosts = [\"127.0.0.1\"]\n", "admin.allowed_hosts[0]", "served already"},
		{"allowed host an IPv6 address", base + "\n[admin]\nallowed_hosts = [\"[::1]\"]\n", "admin.allowed_hosts[0]", "served already"},
		{"allowed host localhost", base + "\n[admin]\nallowed_hosts = [\"LocalHost\"]\n", "admin.allowed_hosts[0]", "served already"},
		{"allowed host twice", base + "\n[admin]\nallowed_hosts = [\"lb1.example.net\", \"LB1.example.net.\"]\n", "admin.allowed_hosts[1]", "listed already"},
		{"allowed hosts without a listener", base + "\n[admin]\nlisten = \"\"\nallowed_hosts = [\"lb1.example.net\"]\n", "admin.allowed_hosts", "no effect"},
		{"fast path with afpacket", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nio = \"afpacket\"\nfast_path = true", 1), "dataplane.fast_path", "ignored"},
		{"busy poll with afpacket", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nio = \"afpacket\"\nbusy_poll_usecs = 50", 1), "dataplane.busy_poll_usecs", "ignored"},
		{"busy poll budget without busy poll", strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nbusy_poll_budget = 32", 1), "dataplane.busy_poll_budget", "no effect"},
		{"no VIPs", "[dataplane]\ningress = \"eth0\"\n", "vip", "no [[vip]]"},
		{"timeouts inverted", base + "\n[conntrack]\ntcp_established_timeout = \"5s\"\n", "conntrack.tcp_established_timeout", "shorter than"},
		{"unconfirmed outlives established", base + "\n[conntrack]\ntcp_unconfirmed_timeout = \"1h\"\n", "conntrack.tcp_established_timeout", "tcp_unconfirmed_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, warns, err := Parse("w.toml", []byte(tt.src))
			if err != nil || cfg == nil {
				t.Fatalf("warning case must load: %v", err)
			}
			for _, w := range warns {
				if w.Key == tt.key && strings.Contains(w.Msg, tt.msg) {
					return
				}
			}
			t.Errorf("no warning for %s containing %q; got %v", tt.key, tt.msg, warns)
		})
	}
}

func TestDefaults(t *testing.T) {
	cfg, warns, err := Parse("d.toml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("unexpected warnings: %v", warns)
	}
	d := cfg.Dataplane
	if d.IO != IOAFXDP || d.Queues != 1 || d.FrameSize != 0 || d.BatchSize != 64 || d.XDPMode != XDPAuto || d.FlowHashSeed != DefaultFlowHashSeed {
		t.Errorf("dataplane defaults wrong: %+v", d)
	}
	if d.TwoArmed() || d.EgressInterface() != "eth0" {
		t.Errorf("one-armed config reported two-armed or wrong egress")
	}
	if cfg.Conntrack.TCPEstablished.D() != 15*time.Minute || cfg.Conntrack.TCPUnconfirmed.D() != 30*time.Second || cfg.Conntrack.Capacity != 1<<20 {
		t.Errorf("conntrack defaults wrong: %+v", cfg.Conntrack)
	}
	if cfg.Admin.Listen != "127.0.0.1:9180" || cfg.Admin.Socket != "/run/vipd/admin.sock" || len(cfg.Admin.AllowedHosts) != 0 {
		t.Errorf("admin defaults wrong: %+v", cfg.Admin)
	}
	v := cfg.VIPs[0]
	if v.Protocol != TCP || v.Mode != ModeNAT || v.TableSize != 65537 || v.FlowHash != Hash5Tuple || v.Scheduler != "maglev" {
		t.Errorf("vip defaults wrong: %+v", v)
	}
	h := v.HealthCheck
	if h.Type != CheckTCP || h.Interval.D() != 2*time.Second || h.Timeout.D() != time.Second || h.Rise != 2 || h.Fall != 3 || h.OnAllDown != AllDownDrop {
		t.Errorf("healthcheck defaults wrong: %+v", h)
	}
	for _, b := range v.Backends {
		if b.Weight != 1 || b.State != StateActive {
			t.Errorf("backend defaults wrong: %+v", b)
		}
	}
}

func TestLineIndex(t *testing.T) {
	src := `# comment
[dataplane]
ingress = "eth0"   # trailing = comment
"quoted" = 1
multi = [
  "a = b",
  "c",
]
[[vip]]
name = "a"
hc.type = "tcp"
text = """
fake = 1
"""
[[vip.backend]]
address = "x"
[[vip.backend]]
address = "y"
[[vip]]
[vip.healthcheck]
rise = 1
[[vip.backend]]
weight = 3
`
	ix := indexLines(src)
	tests := map[string]int{
		"dataplane":                 2,
		"dataplane.ingress":         3,
		"dataplane.quoted":          4,
		"dataplane.multi":           5,
		"vip[0]":                    9,
		"vip[0].name":               10,
		"vip[0].hc.type":            11,
		"vip[0].text":               12,
		"vip[0].backend[0].address": 16,
		"vip[0].backend[1].address": 18,
		"vip[0].backend[1].port":    17, // unset: falls back to its table
		"vip[1].healthcheck.rise":   21,
		"vip[1].backend[0].weight":  23,
		"nothing.here":              0,
	}
	for key, want := range tests {
		if got := ix.lineOf(key); got != want {
			t.Errorf("lineOf(%q) = %d, want %d", key, got, want)
		}
	}
	if ix.lineOf("dataplane.fake") != 2 || ix.lineOf("dataplane.c") != 2 {
		t.Errorf("content of multi-line values was indexed as keys")
	}
}

func TestBusyPollConfig(t *testing.T) {
	cfg, _, err := Parse("d.toml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if d := cfg.Dataplane; d.BusyPollUsecs != DefaultBusyPollUsecs || d.BusyPollBatch() != d.BatchSize {
		t.Errorf("defaults: busy_poll_usecs %d, budget in effect %d; want %d and batch_size (%d)", d.BusyPollUsecs, d.BusyPollBatch(), DefaultBusyPollUsecs, d.BatchSize)
	}
	src := strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nbatch_size = 128\nbusy_poll_usecs = 50", 1)
	if cfg, _, err = Parse("b.toml", []byte(src)); err != nil {
		t.Fatal(err)
	}
	if d := cfg.Dataplane; d.BusyPollUsecs != 50 || d.BusyPollBatch() != 128 {
		t.Errorf("busy_poll_usecs %d, budget in effect %d; want 50 and batch_size 128", d.BusyPollUsecs, d.BusyPollBatch())
	}
	src = strings.Replace(src, "busy_poll_usecs = 50", "busy_poll_usecs = 1000\nbusy_poll_budget = 1024", 1)
	if cfg, _, err = Parse("c.toml", []byte(src)); err != nil {
		t.Fatal(err)
	}
	if d := cfg.Dataplane; d.BusyPollUsecs != 1000 || d.BusyPollBatch() != 1024 {
		t.Errorf("the largest values: busy_poll_usecs %d, budget %d", d.BusyPollUsecs, d.BusyPollBatch())
	}
}

// TestFastPathRefreshOnlyWhenOn: the refresh must be shorter than the
// conntrack timeouts only when the fast path is on; with it off, a short
// timeout (1 s, which the e2e suite uses) is no error because of a knob
// nothing uses, and with auto (the default) a warning that it stays off.
func TestFastPathRefreshOnlyWhenOn(t *testing.T) {
	src := base + "\n[conntrack]\ntcp_closing_timeout = \"1s\"\n"
	cfg, warns, err := Parse("auto.toml", []byte(src))
	if err != nil {
		t.Fatalf("fast path auto, closing timeout 1s: %v", err)
	}
	if len(warns) != 1 || warns[0].Key != "dataplane.fast_path_refresh" || FastPathRefreshFits(&cfg.Dataplane, &cfg.Conntrack) {
		t.Errorf("fast path auto, closing timeout 1s: warnings %v, want one that it stays off", warns)
	}
	off := strings.Replace(src, `ingress = "eth0"`, "ingress = \"eth0\"\nfast_path = false", 1)
	if _, warns, err := Parse("off.toml", []byte(off)); err != nil || len(warns) != 0 {
		t.Fatalf("fast path off, closing timeout 1s: %v, warnings %v", err, warns)
	}
	on := strings.Replace(src, `ingress = "eth0"`, "ingress = \"eth0\"\nfast_path = true", 1)
	if _, _, err := Parse("on.toml", []byte(on)); err == nil || !strings.Contains(err.Error(), "fast_path_refresh") {
		t.Fatalf("fast path on, closing timeout 1s: %v, want the refresh refused", err)
	}
	on = strings.Replace(on, "fast_path = true", "fast_path = true\nfast_path_refresh = \"500ms\"", 1)
	if _, _, err := Parse("short.toml", []byte(on)); err != nil {
		t.Fatalf("fast path on, refresh 500ms, closing timeout 1s: %v", err)
	}
}

// TestProbeDefault: probe defaults by mode (tunnel for DSR, direct for
// NAT), and direct may be chosen for DSR.
func TestProbeDefault(t *testing.T) {
	dsr := strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"", 1)
	tests := []struct {
		name, src string
		want      Probe
	}{
		{"NAT", base, ProbeDirect},
		{"NAT, direct", base + "\n[vip.healthcheck]\nprobe = \"direct\"\n", ProbeDirect},
		{"DSR", dsr, ProbeTunnel},
		{"DSR, direct", dsr + "\n[vip.healthcheck]\nprobe = \"direct\"\n", ProbeDirect},
		{"DSR, tunnel", dsr + "\n[vip.healthcheck]\nprobe = \"tunnel\"\n", ProbeTunnel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := Parse("t.toml", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.VIPs[0].HealthCheck.Probe; got != tt.want {
				t.Errorf("probe %q, want %q", got, tt.want)
			}
		})
	}
}

// TestConsistentSchedulerNoWarning: the consistent schedulers announced
// over BGP draw no scheduler warning.
func TestConsistentSchedulerNoWarning(t *testing.T) {
	for _, s := range []string{SchedMaglev, SchedMaglevBounded} {
		src := strings.Replace(bgpBase, "port = 80", "port = 80\nscheduler = \""+s+"\"", 1)
		_, warns, err := Parse("w.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range warns {
			if strings.HasSuffix(w.Key, ".scheduler") {
				t.Errorf("%s: %v", s, w)
			}
		}
	}
}

// TestPreviousOwnerDefault: previous_owner is on by default exactly for
// DSR VIPs in GUE, and may be turned off there.
func TestPreviousOwnerDefault(t *testing.T) {
	dsr := strings.Replace(strings.ReplaceAll(base, "port = 8080\n", ""), `port = 80`, "port = 80\nmode = \"dsr\"", 1)
	gue := strings.Replace(dsr, `mode = "dsr"`, "mode = \"dsr\"\nencap = \"gue\"", 1)
	for _, tt := range []struct {
		name, src string
		want      bool
	}{
		{"NAT", base, false},
		{"DSR IPIP", dsr, false},
		{"DSR GUE", gue, true},
		{"DSR GUE, off", strings.Replace(gue, `encap = "gue"`, "encap = \"gue\"\nprevious_owner = false", 1), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := Parse("t.toml", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.VIPs[0].HintsPreviousOwner(); got != tt.want {
				t.Errorf("previous_owner %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSteeringCapacity: with AF_XDP, a configuration whose VIP addresses
// or NAT reply sources exceed the steering program's maps is refused by
// validation (so by -check), not at start; AF_PACKET, which has no such
// maps, takes it. The VIP addresses go through Parse; the 262,144 reply
// sources, too many to parse in a test, straight to validateSteering.
func TestSteeringCapacity(t *testing.T) {
	// vips returns n DSR VIPs on distinct addresses, one backend each.
	vips := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "[[vip]]\nname = \"v%d\"\naddress = \"198.18.%d.%d\"\nport = 80\nmode = \"dsr\"\nencap_source = \"198.19.255.1\"\n", i, i>>8, i&255)
			fmt.Fprintf(&b, "[[vip.backend]]\naddress = \"198.19.%d.%d\"\n", i>>8, i&255)
		}
		return b.String()
	}
	steering := func(err error) []string {
		var out []string
		var errs *Errors
		if errors.As(err, &errs) {
			for _, p := range errs.Problems {
				if strings.Contains(p.Msg, "steering program") {
					out = append(out, p.Msg)
				}
			}
		} else if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		return out
	}
	check := func(name string, got []string, want string) {
		t.Helper()
		switch {
		case want == "" && len(got) > 0:
			t.Errorf("%s: refused: %q", name, got)
		case want != "" && (len(got) != 1 || !strings.Contains(got[0], want)):
			t.Errorf("%s: steering errors %q, want one containing %q", name, got, want)
		}
	}
	for _, tc := range []struct {
		name, io string
		n        int
		want     string
	}{
		{"VIP addresses at capacity", "afxdp", MaxSteeredVIPAddrs, ""},
		{"VIP addresses over capacity", "afxdp", MaxSteeredVIPAddrs + 1, "4097 distinct VIP addresses"},
		{"VIP addresses over capacity, AF_PACKET", "afpacket", MaxSteeredVIPAddrs + 1, ""},
	} {
		src := fmt.Sprintf("[dataplane]\ningress = \"eth0\"\nio = %q\n", tc.io) + vips(tc.n)
		_, _, err := Parse("test.toml", []byte(src))
		check(tc.name, steering(err), tc.want)
	}
	// NAT VIPs with n backends in all, 65,535 a VIP at most, on distinct
	// (address, port) pairs; validate calls validateSteering for AF_XDP
	// only (the cases above).
	backends := func(n int) []VIP {
		var out []VIP
		for i := range n {
			if i%65535 == 0 {
				out = append(out, VIP{Address: netip.AddrFrom4([4]byte{198, 18, 0, byte(1 + i/65535)}), Port: 80, Protocol: "tcp", Mode: ModeNAT})
			}
			v := &out[len(out)-1]
			v.Backends = append(v.Backends, Backend{Address: netip.AddrFrom4([4]byte{198, 19, byte(i >> 16), byte(i >> 8)}), Port: uint16(1 + i&255)})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		n    int
		want string
	}{
		{"NAT reply sources at capacity", MaxNATReplySources, ""},
		{"NAT reply sources over capacity", MaxNATReplySources + 1, "262145 distinct NAT backends"},
	} {
		c := &collector{}
		c.validateSteering(backends(tc.n))
		var got []string
		for _, p := range c.errs {
			got = append(got, p.Msg)
		}
		check(tc.name, got, tc.want)
	}
}

// TestTooManyBackends: a VIP holds at most hashing.MaxBackends backends (a
// Maglev slot's 16-bit number); one more was accepted by -check and then
// failed when the snapshot was built.
func TestTooManyBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("parses 65,536 backends")
	}
	for _, n := range []int{hashing.MaxBackends, hashing.MaxBackends + 1} {
		var b strings.Builder
		b.WriteString("[dataplane]\ningress = \"eth0\"\n[[vip]]\nname = \"many\"\naddress = \"198.18.0.1\"\nport = 80\ntable_size = 16777213\n")
		for i := range n {
			fmt.Fprintf(&b, "[[vip.backend]]\naddress = \"198.19.%d.%d\"\nport = %d\n", i>>16&255, i>>8&255, 1+i&255)
		}
		_, _, err := Parse("test.toml", []byte(b.String()))
		refused := err != nil && strings.Contains(err.Error(), "a VIP has at most 65535")
		if refused != (n > hashing.MaxBackends) {
			t.Errorf("%d backends: refused %v; err = %v", n, refused, err)
		}
	}
}

// TestFastPathMode: fast_path takes "auto", "on", "off", true and false,
// and nothing else; it defaults to auto.
func TestFastPathMode(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  FastPathMode
		ok    bool
	}{
		{"", FastPathAuto, true},
		{`"auto"`, FastPathAuto, true},
		{`"on"`, FastPathOn, true},
		{`"off"`, FastPathOff, true},
		{"true", FastPathOn, true},
		{"false", FastPathOff, true},
		{`"yes"`, "", false},
		{"1", "", false},
	} {
		src := base
		if tc.value != "" {
			src = strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nfast_path = "+tc.value, 1)
		}
		cfg, _, err := Parse("f.toml", []byte(src))
		switch {
		case tc.ok && err != nil:
			t.Errorf("fast_path = %s: %v", tc.value, err)
		case tc.ok && cfg.Dataplane.FastPath != tc.want:
			t.Errorf("fast_path = %s: %q, want %q", tc.value, cfg.Dataplane.FastPath, tc.want)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "dataplane.fast_path")):
			t.Errorf("fast_path = %s: %v, want an error naming the key", tc.value, err)
		}
	}
}

// TestAllowedHosts: names load as written (the listener compares them in
// any case), with a trailing dot, underscores and the longest labels.
func TestAllowedHosts(t *testing.T) {
	long := strings.Repeat("a", 63) + ".example"
	src := base + "\n[admin]\nallowed_hosts = [\"lb1.example.net\", \"LB2.Example.NET.\", \"_metrics.lb3.example\", \"" + long + "\", \"lb4\"]\n"
	cfg, warns, err := Parse("a.toml", []byte(src))
	if err != nil || len(warns) != 0 {
		t.Fatalf("Parse: %v, warnings %v", err, warns)
	}
	want := []string{"lb1.example.net", "LB2.Example.NET.", "_metrics.lb3.example", long, "lb4"}
	if !reflect.DeepEqual(cfg.Admin.AllowedHosts, want) {
		t.Errorf("allowed_hosts %q, want %q", cfg.Admin.AllowedHosts, want)
	}
}

// TestAdminEqual: absent and empty allowed_hosts are the same settings
// (a reload must not ask for a restart over it); any other change is not.
func TestAdminEqual(t *testing.T) {
	a := Default().Admin
	tests := []struct {
		name  string
		b     func(b *Admin)
		equal bool
	}{
		{"same", func(*Admin) {}, true},
		{"empty allowed_hosts", func(b *Admin) { b.AllowedHosts = []string{} }, true},
		{"a name added", func(b *Admin) { b.AllowedHosts = []string{"lb1.example.net"} }, false},
		{"listen", func(b *Admin) { b.Listen = "127.0.0.1:9181" }, false},
		{"socket", func(b *Admin) { b.Socket = "" }, false},
		{"pprof", func(b *Admin) { b.Pprof = true }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Default().Admin
			tt.b(&b)
			if got := a.Equal(&b); got != tt.equal {
				t.Errorf("Equal = %v, want %v", got, tt.equal)
			}
		})
	}
}
