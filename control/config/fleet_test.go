package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// fleetLocal is a minimal valid local file with [fleet].
const fleetLocal = `[dataplane]
ingress = "eth0"

[fleet]
endpoints = ["https://10.0.0.1:2379"]
prefix = "/vipd/fleets/edge1/"
`

// sharedVIPs is base's VIP, as the fleet's shared document holds it.
var sharedVIPs = base[strings.Index(base, "[[vip]]"):]

// problems returns the problems of err, an *Errors.
func problems(t *testing.T, err error) []Problem {
	t.Helper()
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v (%T) is not an *Errors", err, err)
	}
	return errs.Problems
}

// findProblem returns the problem among ps with key whose message holds
// msg.
func findProblem(ps []Problem, key, msg string) (Problem, bool) {
	for _, p := range ps {
		if p.Key == key && strings.Contains(p.Msg, msg) {
			return p, true
		}
	}
	return Problem{}, false
}

// writeFiles writes name → content (mode 0600) into dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFleetDefaults(t *testing.T) {
	cfg, warns, err := Parse("vipd.toml", []byte(fleetLocal))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings %v: a box with [fleet] and no [[vip]] is as it should be", warns)
	}
	host, _ := os.Hostname()
	f := cfg.Fleet
	if f == nil {
		t.Fatal("Fleet is nil with [fleet] in the file")
	}
	if f.Box != host || f.CacheFile != DefaultFleetCacheFile || f.DialTimeout.D() != DefaultFleetDialTimeout {
		t.Errorf("defaults: box %q (host %q), cache_file %q, dial_timeout %s", f.Box, host, f.CacheFile, f.DialTimeout)
	}
	if f.Key("config") != "/vipd/fleets/edge1/config" {
		t.Errorf("Key(config) = %q", f.Key("config"))
	}
	if cfg.Dataplane.FlowHashSeed != DefaultFlowHashSeed || len(cfg.VIPs) != 0 {
		t.Errorf("seed %#x, %d VIPs before the shared document", cfg.Dataplane.FlowHashSeed, len(cfg.VIPs))
	}
}

// TestNoFleetUnchanged: a file without [fleet] decodes as it did before
// [fleet] existed: no Fleet, the defaults, its own VIPs.
func TestNoFleetUnchanged(t *testing.T) {
	cfg, _, err := Parse("base.toml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Fleet != nil {
		t.Errorf("Fleet = %+v without [fleet]", cfg.Fleet)
	}
	want := Default()
	want.Dataplane.Ingress = "eth0"
	if cfg.Dataplane != want.Dataplane || cfg.Conntrack != want.Conntrack || !cfg.Admin.Equal(&want.Admin) || cfg.BGP != nil {
		t.Errorf("the box's settings differ from the defaults: %+v", cfg)
	}
	if len(cfg.VIPs) != 1 || cfg.VIPs[0].Name != "web" || len(cfg.VIPs[0].Backends) != 2 {
		t.Errorf("VIPs %+v", cfg.VIPs)
	}
}

func TestFleetValidationErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"pw-empty": "\n", "pw-two": "a\nb\n", "ca.pem": "x"})
	const ep = `endpoints = ["https://10.0.0.1:2379"]`
	const pre = `prefix = "/vipd/fleets/edge1/"`
	// with replaces the line starting as old does in fleetLocal.
	with := func(old, new string) string {
		return strings.Replace(fleetLocal, old, new, 1)
	}
	tests := []struct {
		name, src, key, msg string
	}{
		{"endpoints missing", strings.Replace(with(ep+"\n", ""), "[fleet]", "[fleet] #!", 1), "fleet.endpoints", "required: at least one etcd client URL"},
		{"endpoints empty", with(ep, "endpoints = [] #!"), "fleet.endpoints", "required: at least one"},
		{"endpoints not an array", with(ep, `endpoints = "https://10.0.0.1:2379" #!`), "fleet.endpoints", "must be an array"},
		{"endpoint scheme", with(ep, `endpoints = ["grpc://10.0.0.1:2379"] #!`), "fleet.endpoints[0]", "must start with http:// or https://"},
		{"endpoint without scheme", with(ep, `endpoints = ["10.0.0.1:2379"] #!`), "fleet.endpoints[0]", "is not a URL"},
		{"endpoint without host", with(ep, `endpoints = ["https://:2379"] #!`), "fleet.endpoints[0]", "has no host"},
		{"endpoint with user", with(ep, `endpoints = ["https://u:p@10.0.0.1:2379"] #!`), "fleet.endpoints[0]", "put the user in user"},
		{"endpoint with path", with(ep, `endpoints = ["https://10.0.0.1:2379", "https://10.0.0.2:2379/v3"] #!`), "fleet.endpoints[1]", "without a path or query"},
		{"endpoint port", with(ep, `endpoints = ["https://10.0.0.1:99999"] #!`), "fleet.endpoints[0]", "port must be from 1 to 65535"},
		{"endpoint empty port", with(ep, `endpoints = ["https://10.0.0.1:"] #!`), "fleet.endpoints[0]", "the port is empty"},
		{"endpoint bare IPv6", with(ep, `endpoints = ["https://2001:db8::1:2379"] #!`), "fleet.endpoints[0]", "is not a URL"},
		{"prefix missing", strings.Replace(with(pre, "box = \"lb1\""), "[fleet]", "[fleet] #!", 1), "fleet.prefix", "required"},
		{"prefix relative", with(pre, `prefix = "vipd/edge1/" #!`), "fleet.prefix", `must start and end with "/"`},
		{"prefix without final slash", with(pre, `prefix = "/vipd/edge1" #!`), "fleet.prefix", `must start and end with "/"`},
		{"prefix root", with(pre, `prefix = "/" #!`), "fleet.prefix", "not the root of the key space"},
		{"prefix empty element", with(pre, `prefix = "/vipd//edge1/" #!`), "fleet.prefix", `empty element ("//")`},
		{"prefix control character", with(pre, `prefix = "/vipd/\tedge1/" #!`), "fleet.prefix", "control character"},
		{"box empty", fleetLocal + "box = \"\" #!", "fleet.box", "required"},
		{"box with slash", fleetLocal + "box = \"edge/lb1\" #!", "fleet.box", "one key element, without \"/\""},
		{"box dot dot", fleetLocal + "box = \"..\" #!", "fleet.box", "is not a name"},
		{"cache file relative", fleetLocal + "cache_file = \"fleet.toml\" #!", "fleet.cache_file", "clean absolute path"},
		{"cache file empty", fleetLocal + "cache_file = \"\" #!", "fleet.cache_file", "required"},
		{"dial timeout short", fleetLocal + "dial_timeout = \"10ms\" #!", "fleet.dial_timeout", "must be from 100ms to 1m0s, not 10ms"},
		{"dial timeout not a duration", fleetLocal + "dial_timeout = 5 #!", "fleet.dial_timeout", "must be a string"},
		{"cert without key", fleetLocal + "cert_file = \"ca.pem\" #!", "fleet.cert_file", "needs key_file too"},
		{"key without cert", fleetLocal + "key_file = \"ca.pem\" #!", "fleet.key_file", "needs cert_file too"},
		{"user without password", fleetLocal + "user = \"vipd\" #!", "fleet.user", "needs password_file too"},
		{"password without user", fleetLocal + "password_file = \"pw-two\" #!", "fleet.password_file", "needs user too"},
		{"user with colon", fleetLocal + "user = \"a:b\" #!\npassword_file = \"pw-two\"", "fleet.user", `cannot contain ":"`},
		{"ca file missing", fleetLocal + "ca_file = \"nope.pem\" #!", "fleet.ca_file", "no such file"},
		{"ca file a directory", fleetLocal + "ca_file = \".\" #!", "fleet.ca_file", "is not a regular file"},
		{"password file empty", fleetLocal + "user = \"vipd\"\npassword_file = \"pw-empty\" #!", "fleet.password_file", "is empty"},
		{"password file two lines", fleetLocal + "user = \"vipd\"\npassword_file = \"pw-two\" #!", "fleet.password_file", "more than one line"},
		{"unknown key", fleetLocal + "endpoint = [] #!", "fleet.endpoint", `did you mean "endpoints"`},
		{"fleet not a table", "fleet = 1 #!\n" + strings.Split(fleetLocal, "[fleet]")[0], "fleet", "must be a table"},
		{"local vip", fleetLocal + "\n" + strings.Replace(sharedVIPs, "[[vip]]", "[[vip]] #!", 1), "vip[0]", `[[vip]] "web" cannot be in the local file with [fleet] (line 4): the fleet's config key holds every VIP`},
		{"local seed", with(`ingress = "eth0"`, "ingress = \"eth0\"\nflow_hash_seed = 42 #!"), "dataplane.flow_hash_seed", "cannot be in the local file with [fleet] (line 5): the fleet's config key holds the seed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "vipd.toml")
			writeFiles(t, dir, map[string]string{"vipd.toml": tt.src})
			_, _, err := Load(path)
			if err == nil {
				t.Fatalf("no error for:\n%s", tt.src)
			}
			ps := problems(t, err)
			p, ok := findProblem(ps, tt.key, tt.msg)
			if !ok {
				t.Fatalf("no problem at %s with %q among:\n%v", tt.key, tt.msg, err)
			}
			if want := markLine(t, tt.src); p.Line != want {
				t.Errorf("%s: line %d, want %d", p, p.Line, want)
			}
			if p.File != path {
				t.Errorf("%s: file %q, want %q", p, p.File, path)
			}
		})
	}
}

// TestFleetFiles: relative TLS and password files are taken from the
// configuration file's directory; secret files readable by others are
// warned of; the password is read and never printed.
func TestFleetFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"ca.pem": "ca", "cert.pem": "cert", "key.pem": "key", "pw": "s3cret\n"})
	if err := os.Chmod(filepath.Join(dir, "key.pem"), 0o640); err != nil {
		t.Fatal(err)
	}
	src := fleetLocal + `ca_file = "ca.pem"
cert_file = "cert.pem"
key_file = "key.pem"
user = "vipd-box"
password_file = "pw"
`
	writeFiles(t, dir, map[string]string{"vipd.toml": src})
	cfg, warns, err := Load(filepath.Join(dir, "vipd.toml"))
	if err != nil {
		t.Fatal(err)
	}
	f := cfg.Fleet
	for _, got := range []struct{ path, name string }{{f.CAFile, "ca.pem"}, {f.CertFile, "cert.pem"}, {f.KeyFile, "key.pem"}, {f.PasswordFile, "pw"}} {
		if want := filepath.Join(dir, got.name); got.path != want {
			t.Errorf("path %q, want %q", got.path, want)
		}
	}
	if string(f.Password) != "s3cret" || f.User != "vipd-box" {
		t.Errorf("user %q, password %q", f.User, string(f.Password))
	}
	if s := f.Password.String(); strings.Contains(s, "s3cret") {
		t.Errorf("the password prints: %s", s)
	}
	if len(warns) != 1 || warns[0].Key != "fleet.key_file" || !strings.Contains(warns[0].Msg, "readable by others than its owner (mode 0640): chmod 600 it") {
		t.Errorf("warnings %v, want one about key_file's mode", warns)
	}

	// An absolute path stays as it is; a world-readable password file
	// is warned of as the key is.
	if err := os.Chmod(filepath.Join(dir, "pw"), 0o644); err != nil {
		t.Fatal(err)
	}
	abs := strings.Replace(src, `"pw"`, `"`+filepath.Join(dir, "pw")+`"`, 1)
	_, warns, err = Parse("/elsewhere/vipd.toml", []byte(strings.Replace(abs, "key.pem", filepath.Join(dir, "key.pem"), 1)))
	if err == nil {
		t.Fatal("ca.pem and cert.pem, relative to /elsewhere, were found")
	}
	if _, ok := findProblem(problems(t, err), "fleet.ca_file", "/elsewhere/ca.pem"); !ok {
		t.Errorf("ca_file not resolved from /elsewhere: %v", err)
	}
	if _, ok := findProblem(warns, "fleet.password_file", "(mode 0644)"); !ok {
		t.Errorf("no warning about password_file's mode: %v", warns)
	}
}

func TestFleetWarnings(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"ca.pem": "ca", "pw": "pw"})
	tests := []struct {
		name, src, key, msg string
	}{
		{"duplicate endpoint", strings.Replace(fleetLocal, `"https://10.0.0.1:2379"]`, `"https://10.0.0.1:2379", "https://10.0.0.1:2379"]`, 1), "fleet.endpoints[1]", "is listed already (fleet.endpoints[0])"},
		{"TLS files over http", strings.Replace(fleetLocal, "https://", "http://", 1) + "ca_file = \"ca.pem\"\n", "fleet.endpoints", "no endpoint is https://"},
		{"password over http", strings.Replace(fleetLocal, "https://", "http://", 1) + "user = \"u\"\npassword_file = \"pw\"\n", "fleet.user", "the password travels unencrypted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeFiles(t, dir, map[string]string{"vipd.toml": tt.src})
			_, warns, err := Load(filepath.Join(dir, "vipd.toml"))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := findProblem(warns, tt.key, tt.msg); !ok {
				t.Errorf("no warning at %s with %q among %v", tt.key, tt.msg, warns)
			}
		})
	}
}

const sharedName = "etcd /vipd/fleets/edge1/config@rev 42"

func TestWithShared(t *testing.T) {
	local, _, err := Parse("vipd.toml", []byte(fleetLocal))
	if err != nil {
		t.Fatal(err)
	}
	shared := "flow_hash_seed = 42\n\n" + sharedVIPs
	cfg, warns, err := WithShared(local, sharedName, []byte(shared))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %v", warns)
	}
	// One code path: the result is what the same settings written in one
	// file load to, and [fleet].
	file, _, err := Parse("vipd.toml", []byte(strings.Replace(base, `ingress = "eth0"`, "ingress = \"eth0\"\nflow_hash_seed = 42", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Fleet != local.Fleet {
		t.Errorf("the result's Fleet is not the local file's")
	}
	got := *cfg
	got.Fleet = nil
	if !reflect.DeepEqual(&got, file) {
		t.Errorf("WithShared:\n%+v\none file:\n%+v", &got, file)
	}
	if local.Dataplane.FlowHashSeed != DefaultFlowHashSeed || len(local.VIPs) != 0 {
		t.Errorf("WithShared changed the local configuration")
	}

	// Without flow_hash_seed the shared document has the file's default.
	cfg, _, err = WithShared(local, sharedName, []byte(sharedVIPs))
	if err != nil || cfg.Dataplane.FlowHashSeed != DefaultFlowHashSeed {
		t.Errorf("seed %#x, error %v", cfg.Dataplane.FlowHashSeed, err)
	}

	// An empty document is a fleet without VIPs: a warning, as a file.
	_, warns, err = WithShared(local, sharedName, nil)
	if err != nil || len(warns) != 1 || warns[0].File != sharedName || !strings.Contains(warns[0].Msg, "no [[vip]]") {
		t.Errorf("empty document: %v, %v", warns, err)
	}

	// The local file's own warnings were its loading's: a shared
	// document does not repeat them.
	public, warns, err := Parse("vipd.toml", []byte(fleetLocal+"\n[admin]\nlisten = \"0.0.0.0:9180\"\n"))
	if err != nil || len(warns) != 1 {
		t.Fatalf("local file: %v, %v", warns, err)
	}
	if _, warns, err = WithShared(public, sharedName, []byte(sharedVIPs)); err != nil || len(warns) != 0 {
		t.Errorf("WithShared repeats the local file's warnings: %v, %v", warns, err)
	}

	if _, _, err := WithShared(&Config{}, sharedName, []byte(sharedVIPs)); err == nil {
		t.Error("WithShared without [fleet] succeeded")
	}
}

func TestWithSharedErrors(t *testing.T) {
	// egress_mtu 1000 is valid alone and too small for an IPv6 VIP.
	const localSrc = "[dataplane]\ningress = \"eth0\"\negress_mtu = 1000\n\n[fleet]\nendpoints = [\"https://10.0.0.1:2379\"]\nprefix = \"/vipd/fleets/edge1/\"\n"
	local, _, err := Parse("vipd.toml", []byte(localSrc))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, src, file, key, msg string
		line                      int // 0: the #! marker's in src
	}{
		{"bad TOML", "flow_hash_seed = 42\n[[vip] #!\n", sharedName, "", "", 0},
		{"unknown key", "verbose = true #!\n" + sharedVIPs, sharedName, "verbose", `unknown key "verbose"`, 0},
		{"misspelt key", "flow_hash_sed = 1 #!\n" + sharedVIPs, sharedName, "flow_hash_sed", `did you mean "flow_hash_seed"`, 0},
		{"seed not an integer", "flow_hash_seed = \"42\" #!\n" + sharedVIPs, sharedName, "flow_hash_seed", "must be an integer", 0},
		{"local table admin", sharedVIPs + "\n[admin] #!\nlisten = \"\"\n", sharedName, "admin", "[admin] belongs in each box's local file, not in the fleet's shared configuration", 0},
		{"local table dataplane", "[dataplane] #!\nflow_hash_seed = 1\n" + sharedVIPs, sharedName, "dataplane", "[dataplane] belongs in each box's local file", 0},
		{"local table fleet", sharedVIPs + "\n[fleet] #!\nbox = \"a\"\n", sharedName, "fleet", "[fleet] belongs in each box's local file", 0},
		{"invalid VIP", strings.Replace(sharedVIPs, "port = 80", "port = 80\nprotocol = \"sctp\" #!", 1), sharedName, "vip[0].protocol", `must be "tcp" or "udp", not "sctp"`, 0},
		{"invalid backend", strings.Replace(sharedVIPs, "port = 8080", "port = 8080\nweight = 0 #!", 1), sharedName, "vip[0].backend[0].weight", "", 0},
		{"VIPs clash", sharedVIPs + "\n" + strings.Replace(strings.Replace(sharedVIPs, `"web"`, `"web2"`, 1), `"198.18.0.100"`, `"198.18.0.100" #!`, 1), sharedName, "vip[1].address", "overlaps vip[0]", 0},
		{"announce without the box's bgp", strings.Replace(sharedVIPs, "port = 80", "port = 80\nannounce = true #!", 1), sharedName, "vip[0].announce", "needs a [bgp] table", 0},
		{"the box's egress_mtu", strings.Replace(strings.Replace(sharedVIPs, "198.18.0.100", "2001:db8::100", 1), "198.18.1.1", "2001:db8:1::1", -1), "vipd.toml", "dataplane.egress_mtu", "from 1280", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := WithShared(local, sharedName, []byte(tt.src))
			if err == nil {
				t.Fatalf("no error for:\n%s", tt.src)
			}
			ps := problems(t, err)
			var p Problem
			if tt.key == "" && tt.msg == "" {
				p = ps[0] // a syntax error comes alone
			} else {
				var ok bool
				if p, ok = findProblem(ps, tt.key, tt.msg); !ok {
					t.Fatalf("no problem at %s with %q among:\n%v", tt.key, tt.msg, err)
				}
			}
			line := tt.line
			if line == 0 {
				line = markLine(t, tt.src)
			}
			if p.File != tt.file || p.Line != line {
				t.Errorf("%s: at %s:%d, want %s:%d", p, p.File, p.Line, tt.file, line)
			}
			if want := tt.file + ":"; !strings.HasPrefix(p.String(), want) {
				t.Errorf("%q does not start with %q", p.String(), want)
			}
		})
	}
}

func TestLoadShared(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shared.toml")
	writeFiles(t, dir, map[string]string{"shared.toml": "flow_hash_seed = 7\n" + sharedVIPs})
	cfg, _, err := LoadShared(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Dataplane.FlowHashSeed != 7 || len(cfg.VIPs) != 1 || cfg.VIPs[0].Announced() {
		t.Errorf("seed %#x, VIPs %+v", cfg.Dataplane.FlowHashSeed, cfg.VIPs)
	}

	// Against a box with [bgp], VIPs are announced by default, as on
	// the fleet's boxes.
	box, _, err := Parse("box.toml", []byte(strings.Replace(bgpBase, sharedVIPs, "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _, err = LoadShared(path, box); err != nil || !cfg.VIPs[0].Announced() {
		t.Errorf("with [bgp]: %v", err)
	}

	bad := strings.Replace(sharedVIPs, "port = 80", "port = 80\nmode = \"tunnel\" #!", 1)
	writeFiles(t, dir, map[string]string{"shared.toml": bad})
	_, _, err = LoadShared(path, nil)
	if err == nil {
		t.Fatal("an invalid mode loaded")
	}
	want := path + ":" + strconv.Itoa(markLine(t, bad)) + ": vip[0].mode: "
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("%v, want it to start with %q", err, want)
	}

	if _, _, err := LoadShared(filepath.Join(dir, "none.toml"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// TestFleetDiff: a reload's diff shows [fleet] coming, going and its
// keys changing, never the password.
func TestFleetDiff(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"pw1": "one", "pw2": "two"})
	load := func(src string) *Config {
		t.Helper()
		writeFiles(t, dir, map[string]string{"vipd.toml": src})
		cfg, _, err := Load(filepath.Join(dir, "vipd.toml"))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	plain := load("[dataplane]\ningress = \"eth0\"\n")
	a := load(fleetLocal + "user = \"u\"\npassword_file = \"pw1\"\n")
	b := load(strings.Replace(fleetLocal, "edge1", "edge2", 1) + "user = \"u\"\npassword_file = \"pw2\"\n")
	if got := Compare(plain, a).Keys; len(got) != 1 || got[0].String() != "[fleet] added" {
		t.Errorf("added: %v", got)
	}
	if got := Compare(a, plain).Keys; len(got) != 1 || got[0].String() != "[fleet] removed" {
		t.Errorf("removed: %v", got)
	}
	var got []string
	for _, c := range Compare(a, b).Keys {
		got = append(got, c.String())
	}
	want := []string{
		`[fleet] prefix changed ("/vipd/fleets/edge1/" → "/vipd/fleets/edge2/")`,
		`[fleet] password_file changed (` + strconv.Quote(filepath.Join(dir, "pw1")) + ` → ` + strconv.Quote(filepath.Join(dir, "pw2")) + `)`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changes:\n%q\nwant:\n%q", got, want)
	}
	if Compare(a, a).Empty() != true {
		t.Errorf("a configuration differs from itself: %v", Compare(a, a).Keys)
	}
}

// TestExampleFleet: the commented-out [fleet] of config.toml.example,
// uncommented beside the box's own tables (its files made), loads, and
// to the values its comments state.
func TestExampleFleet(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config.toml.example"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n# [fleet]\n")
	if start < 0 || !strings.Contains(text[start:], "\n[[vip]]") {
		t.Fatal("config.toml.example has no commented-out [fleet] before a [[vip]]")
	}
	end := start + strings.Index(text[start:], "\n[[vip]]")
	dir := t.TempDir()
	var fleet []string
	for _, l := range strings.Split(text[start:end], "\n") {
		if m := exampleKey.FindStringSubmatch(l); m != nil || exampleTable.MatchString(l) {
			fleet = append(fleet, strings.ReplaceAll(strings.TrimPrefix(l, "# "), "/etc/vipd/", dir+"/"))
		}
	}
	writeFiles(t, dir, map[string]string{"etcd-ca.pem": "ca", "etcd-client.pem": "c", "etcd-client-key.pem": "k", "etcd-password": "pw\n"})
	cfg, warns, err := Parse(filepath.Join(dir, "vipd.toml"), []byte("[dataplane]\ningress = \"eth0\"\n\n"+strings.Join(fleet, "\n")+"\n"))
	if err != nil {
		t.Fatalf("%v\n%s", err, strings.Join(fleet, "\n"))
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %v", warns)
	}
	f := cfg.Fleet
	if len(f.Endpoints) != 3 || f.Prefix != "/vipd/fleets/edge1/" || f.Box != "lb1" || f.CacheFile != DefaultFleetCacheFile ||
		f.DialTimeout.D() != DefaultFleetDialTimeout || string(f.Password) != "pw" {
		t.Errorf("the example's [fleet]: %+v", f)
	}
}
