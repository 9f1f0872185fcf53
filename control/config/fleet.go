package config

// The [fleet] table: a box whose seed and VIPs come from etcd.
// The local file keeps what belongs to the box ([dataplane], [conntrack],
// [admin], [bgp]) and says where the fleet is; the fleet's shared
// document (shared.go) holds flow_hash_seed and every [[vip]].

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Fleet defaults and limits.
const (
	// DefaultFleetCacheFile is where a box keeps the last fleet revision
	// it applied, to start from when etcd is unreachable: beside
	// DefaultStateFile, in the directory vipd.service owns.
	DefaultFleetCacheFile   = "/var/lib/vipd/fleet.cache"
	DefaultFleetDialTimeout = 5 * time.Second
	MinFleetDialTimeout     = 100 * time.Millisecond
	MaxFleetDialTimeout     = time.Minute
)

// Fleet is the [fleet] table; Config.Fleet is nil when the file has none,
// and then nothing of this file's behaviour changes.
type Fleet struct {
	// Endpoints are the etcd cluster's client URLs, http:// or https://.
	Endpoints []string `toml:"endpoints"`
	// Prefix is the fleet's etcd key prefix ("/vipd/fleets/edge1/"):
	// the shared configuration is Prefix+"config".
	Prefix string `toml:"prefix"`
	// Box is this box's name in the fleet (its key boxes/<Box>); the
	// host name when the file does not say.
	Box string `toml:"box"`
	// CacheFile keeps the last applied revision.
	CacheFile string `toml:"cache_file"`
	// TLS: the CA that signs the etcd servers' certificates, and this
	// box's client certificate and key (both or neither). Load turns a
	// relative path into one from the configuration file's directory.
	CAFile   string `toml:"ca_file"`
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// User authenticates to etcd with the password in PasswordFile (both
	// or neither); the path is resolved as the TLS files' are.
	User         string `toml:"user"`
	PasswordFile string `toml:"password_file"`
	// Password is what PasswordFile holds (without a final newline),
	// read by Load; never printed (Key's String hides it).
	Password    Key      `toml:"-"`
	DialTimeout Duration `toml:"dial_timeout"`

	// The local file, for WithShared: its name and line index place a
	// problem of the box's own settings that only the shared VIPs
	// reveal, and its directory resolves relative paths (key_file of
	// QUIC-LB) of the shared document.
	file  string
	lines *lineIndex
	dir   string
}

func (f *Fleet) setDefaults() {
	host, _ := os.Hostname() // empty on failure: validateFleet says "required"
	*f = Fleet{Box: host, CacheFile: DefaultFleetCacheFile, DialTimeout: Duration(DefaultFleetDialTimeout)}
}

// Key returns the etcd key of name under the fleet's prefix
// (f.Key("config")).
func (f *Fleet) Key(name string) string { return f.Prefix + name }

// validateFleet checks the [fleet] table of a local file and reads its
// password file.
func (c *collector) validateFleet(f *Fleet) {
	const p = "fleet"
	f.file, f.lines, f.dir = c.file, c.lines, c.dir
	c.validateEndpoints(f)
	switch pre := f.Prefix; {
	case pre == "":
		c.errorf(p+".prefix", "required: the fleet's etcd key prefix, for example %q", "/vipd/fleets/edge1/")
	case !strings.HasPrefix(pre, "/") || !strings.HasSuffix(pre, "/"):
		c.errorf(p+".prefix", "%q must start and end with \"/\" (for example %q)", pre, "/vipd/fleets/edge1/")
	case pre == "/":
		c.errorf(p+".prefix", "must name the fleet's own directory, not the root of the key space (for example %q)", "/vipd/fleets/edge1/")
	case strings.Contains(pre, "//"):
		c.errorf(p+".prefix", "%q has an empty element (\"//\")", pre)
	case strings.ContainsFunc(pre, isControl):
		c.errorf(p+".prefix", "%q has a control character", pre)
	}
	switch b := f.Box; {
	case b == "":
		c.errorf(p+".box", "required: this box's name in the fleet (the host name could not be read)")
	case strings.Contains(b, "/"):
		c.errorf(p+".box", "%q must be one key element, without \"/\"", b)
	case b == "." || b == "..":
		c.errorf(p+".box", "%q is not a name", b)
	case strings.ContainsFunc(b, isControl):
		c.errorf(p+".box", "%q has a control character", b)
	}
	switch cf := f.CacheFile; {
	case cf == "":
		c.errorf(p+".cache_file", "required: where the last applied revision is kept (for example %q)", DefaultFleetCacheFile)
	case !filepath.IsAbs(cf) || strings.HasSuffix(cf, "/") || filepath.Clean(cf) != cf:
		c.errorf(p+".cache_file", "must be the clean absolute path of a file (for example %q), not %q", DefaultFleetCacheFile, cf)
	}
	if d := f.DialTimeout.D(); d < MinFleetDialTimeout || d > MaxFleetDialTimeout {
		c.errorf(p+".dial_timeout", "must be from %s to %s, not %s", MinFleetDialTimeout, MaxFleetDialTimeout, f.DialTimeout)
	}
	if (f.CertFile == "") != (f.KeyFile == "") {
		k, other := "cert_file", "key_file"
		if f.CertFile == "" {
			k, other = other, k
		}
		c.errorf(p+"."+k, "needs %s too: a client certificate and its key go together", other)
	}
	if (f.User == "") != (f.PasswordFile == "") {
		k, other := "user", "password_file"
		if f.User == "" {
			k, other = other, k
		}
		c.errorf(p+"."+k, "needs %s too: etcd authenticates a user by its password", other)
	}
	if f.User != "" && strings.Contains(f.User, ":") {
		c.errorf(p+".user", "%q: etcd user names cannot contain \":\"", f.User)
	}
	c.fleetFile(p+".ca_file", &f.CAFile, false)
	c.fleetFile(p+".cert_file", &f.CertFile, false)
	c.fleetFile(p+".key_file", &f.KeyFile, true)
	if c.fleetFile(p+".password_file", &f.PasswordFile, true) {
		c.readPassword(p+".password_file", f)
	}
	tls := false
	for _, e := range f.Endpoints {
		tls = tls || strings.HasPrefix(e, "https://")
	}
	if !tls && len(f.Endpoints) > 0 {
		if f.CAFile != "" || f.CertFile != "" {
			c.warnf(p+".endpoints", "no endpoint is https://: ca_file, cert_file and key_file have no effect")
		}
		if f.User != "" {
			c.warnf(p+".user", "every endpoint is http://: the password travels unencrypted")
		}
	}
}

// validateEndpoints checks that every endpoint is an etcd client URL:
// http:// or https://, a host and maybe a port, nothing else.
func (c *collector) validateEndpoints(f *Fleet) {
	const key = "fleet.endpoints"
	if len(f.Endpoints) == 0 {
		c.errorf(key, "required: at least one etcd client URL (for example %q)", "https://10.0.0.1:2379")
		return
	}
	seen := map[string]int{}
	for i, e := range f.Endpoints {
		k := fmt.Sprintf("%s[%d]", key, i)
		u, err := url.Parse(e)
		switch {
		case err != nil:
			c.errorf(k, "%q is not a URL (write it like %q)", e, "https://10.0.0.1:2379")
			continue
		case u.Scheme != "http" && u.Scheme != "https":
			c.errorf(k, "%q must start with http:// or https://", e)
			continue
		case u.Host == "" || u.Hostname() == "":
			c.errorf(k, "%q has no host", e)
			continue
		case u.User != nil:
			c.errorf(k, "%q: put the user in user and its password in password_file, not in the URL", e)
			continue
		case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
			c.errorf(k, "%q must be scheme://host:port, without a path or query", e)
			continue
		}
		if port := u.Port(); port != "" {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				c.errorf(k, "%q: the port must be from 1 to 65535", e)
				continue
			}
		} else if strings.HasSuffix(u.Host, ":") {
			c.errorf(k, "%q: the port is empty", e)
			continue
		}
		if j, dup := seen[e]; dup {
			c.warnf(k, "%q is listed already (%s[%d])", e, key, j)
			continue
		}
		seen[e] = i
	}
}

// fleetFile resolves *path, when set, from the configuration file's
// directory and checks that it names a regular file; secret files
// readable by others than their owner are warned of, as QUIC-LB's key
// files are. It reports whether the file is there to read.
func (c *collector) fleetFile(key string, path *string, secret bool) bool {
	if *path == "" {
		return false
	}
	if !filepath.IsAbs(*path) && c.dir != "" {
		*path = filepath.Join(c.dir, *path)
	}
	fi, err := os.Stat(*path)
	if err != nil {
		c.errorf(key, "%v", err)
		return false
	}
	if !fi.Mode().IsRegular() {
		c.errorf(key, "%s is not a regular file", *path)
		return false
	}
	if secret && fi.Mode().Perm()&0o077 != 0 {
		c.warnf(key, "%s is readable by others than its owner (mode %04o): chmod 600 it", *path, fi.Mode().Perm())
	}
	return true
}

// readPassword reads the password file into f.Password: its content
// without a final line break. The password is never part of a message.
func (c *collector) readPassword(key string, f *Fleet) {
	raw, err := os.ReadFile(f.PasswordFile)
	if err != nil {
		c.errorf(key, "%v", err)
		return
	}
	pw := bytes.TrimSuffix(bytes.TrimSuffix(raw, []byte("\n")), []byte("\r"))
	switch {
	case len(pw) == 0:
		c.errorf(key, "%s is empty: it must hold the user's password", f.PasswordFile)
	case bytes.ContainsAny(pw, "\r\n"):
		c.errorf(key, "%s has more than one line: it must hold the password alone", f.PasswordFile)
	default:
		f.Password = Key(pw)
	}
}

// checkFleetLocal: with [fleet], the seed and the VIPs are the fleet's,
// and the local file saying them too is an error naming both places.
// raw is the decoded file, where a key's presence shows (the decoded
// Config holds the seed's default either way).
func (c *collector) checkFleetLocal(raw map[string]any, cfg *Config) {
	if cfg.Fleet == nil {
		return
	}
	at := ""
	if l := c.lines.lineOf("fleet"); l > 0 {
		at = fmt.Sprintf(" (line %d)", l)
	}
	if dp, ok := raw["dataplane"].(map[string]any); ok {
		if _, ok := dp["flow_hash_seed"]; ok {
			c.errorf("dataplane.flow_hash_seed", "cannot be in the local file with [fleet]%s: the fleet's config key holds the seed", at)
		}
	}
	for i, v := range cfg.VIPs {
		c.errorf(fmt.Sprintf("vip[%d]", i), "[[vip]] %q cannot be in the local file with [fleet]%s: the fleet's config key holds every VIP", v.Name, at)
	}
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
