package config

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vipd/vipd/dataplane/quiclb"
)

// QUICLB is a UDP VIP's QUIC-LB routing (draft-ietf-quic-load-balancers):
// its backends issue connection IDs that encode their server ID, and vipd
// decodes it from every client packet, so that a connection keeps its
// server when the client's address changes and across every box and
// backend change. Packets whose ID routes nowhere fall back to the
// connection table and the scheduler.
type QUICLB struct {
	// Enabled turns the routing on; written false, the VIP is a plain UDP
	// VIP that keeps its QUIC-LB settings. True when the table is there.
	Enabled bool `toml:"enabled"`
	// Configs are the configurations in use, at most one per config
	// rotation codepoint (0 to 6): two during a rotation.
	Configs []QUICLBConfig `toml:"config"`
}

func (q *QUICLB) setDefaults() { q.Enabled = true }

// QUICLBConfig is one QUIC-LB configuration: the connection IDs whose
// first octet's top three bits are Rotation have a server ID of
// ServerIDLen octets and a nonce of NonceLen, encrypted with the key in
// KeyFile (plaintext without one).
type QUICLBConfig struct {
	Rotation    int    `toml:"rotation"`
	ServerIDLen int    `toml:"server_id_len"`
	NonceLen    int    `toml:"nonce_len"`
	KeyFile     string `toml:"key_file"`
	// Key is the key KeyFile holds, read by Load (nil without a file).
	// It is never printed: Key's String hides it.
	Key Key `toml:"-"`
}

func (q *QUICLBConfig) setDefaults() { q.Rotation = -1 }

// Key is secret key material: printing it (fmt's verbs, JSON, text)
// shows only that it is set.
type Key []byte

func (k Key) String() string {
	if len(k) == 0 {
		return "(none)"
	}
	return "(secret)"
}

// GoString hides the key from %#v as String does from %v.
func (k Key) GoString() string { return k.String() }

// MarshalText hides the key from encoders.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Quiclb returns the configuration as package quiclb takes it.
func (q *QUICLBConfig) Quiclb() quiclb.Config {
	return quiclb.Config{Rotation: uint8(q.Rotation), ServerIDLen: q.ServerIDLen, NonceLen: q.NonceLen, Key: []byte(q.Key)}
}

// ServerIDs are a backend's QUIC-LB server IDs by configuration: in the
// file an inline table of rotation codepoints to hex strings.
type ServerIDs map[uint8][]byte

// String writes s as the file does: { 0 = "0a01", 1 = "7c02" }.
func (s ServerIDs) String() string {
	if len(s) == 0 {
		return "unset"
	}
	rots := make([]int, 0, len(s))
	for r := range s {
		rots = append(rots, int(r))
	}
	slices.Sort(rots)
	parts := make([]string, len(rots))
	for i, r := range rots {
		parts[i] = fmt.Sprintf("%d = %q", r, hex.EncodeToString(s[uint8(r)]))
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// summary describes q for a reload's report, keys left out: "unset",
// "off", or the configurations, like "0 (2+6, keyed), 1 (2+6, plaintext)".
func (q *QUICLB) summary() string {
	switch {
	case q == nil:
		return "unset"
	case !q.Enabled:
		return "off"
	}
	parts := make([]string, len(q.Configs))
	for i, c := range q.Configs {
		form := "plaintext"
		if c.KeyFile != "" {
			form = "keyed by " + c.KeyFile
		}
		parts[i] = fmt.Sprintf("%d (%d+%d, %s)", c.Rotation, c.ServerIDLen, c.NonceLen, form)
	}
	return strings.Join(parts, ", ")
}

// decodeValue implements valueDecoder.
func (s *ServerIDs) decodeValue(src any) error {
	m, ok := src.(map[string]any)
	if !ok {
		return fmt.Errorf("must be a table of configuration to server ID, like { 0 = \"0a01\" }, not %s", describe(src))
	}
	out := make(ServerIDs, len(m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		rot, err := strconv.ParseUint(k, 10, 8)
		if err != nil || rot >= quiclb.NumConfigs {
			return fmt.Errorf("key %q: must be a configuration's rotation codepoint, 0 to %d", k, quiclb.NumConfigs-1)
		}
		str, ok := m[k].(string)
		if !ok {
			return fmt.Errorf("%s: must be a hex string, not %s", k, describe(m[k]))
		}
		id, err := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(str, "0x"), "0X"))
		if err != nil || len(id) == 0 {
			return fmt.Errorf("%s: %q is not a server ID in hex (an even number of hex digits, like \"0a01\")", k, str)
		}
		out[uint8(rot)] = id
	}
	*s = out
	return nil
}

// validateQUICLB checks [vip.quic_lb], reads its keys, and checks the
// backends' server IDs against it.
func (c *collector) validateQUICLB(p string, v *VIP) {
	q := v.QUICLB
	if q == nil {
		for i := range v.Backends {
			if len(v.Backends[i].QUICLBServerIDs) > 0 {
				c.errorf(fmt.Sprintf("%s.backend[%d].quic_lb_server_ids", p, i), "the VIP has no [vip.quic_lb]: add it, or remove the server IDs")
			}
		}
		return
	}
	p += ".quic_lb"
	if v.Protocol != UDP {
		c.errorf(p, "needs protocol = %q: QUIC runs over UDP", UDP)
		return
	}
	if len(q.Configs) == 0 {
		c.errorf(p+".config", "QUIC-LB needs at least one [[vip.quic_lb.config]]")
		return
	}
	byRot := make(map[int]*QUICLBConfig, len(q.Configs))
	for i := range q.Configs {
		qc := &q.Configs[i]
		cp := fmt.Sprintf("%s.config[%d]", p, i)
		switch {
		case qc.Rotation < 0:
			c.errorf(cp+".rotation", "required: the configuration's codepoint, 0 to %d", quiclb.NumConfigs-1)
		case qc.Rotation >= quiclb.NumConfigs:
			c.errorf(cp+".rotation", "must be from 0 to %d, not %d (%d, 0b111, marks IDs for 4-tuple routing)", quiclb.NumConfigs-1, qc.Rotation, quiclb.Unroutable)
		default:
			if _, dup := byRot[qc.Rotation]; dup {
				c.errorf(cp+".rotation", "configuration %d is given twice", qc.Rotation)
			} else {
				byRot[qc.Rotation] = qc
			}
		}
		if qc.ServerIDLen < quiclb.MinServerIDLen {
			c.errorf(cp+".server_id_len", "must be at least %d octet, not %d", quiclb.MinServerIDLen, qc.ServerIDLen)
		}
		if qc.NonceLen < quiclb.MinNonceLen {
			c.errorf(cp+".nonce_len", "must be at least %d octets, not %d", quiclb.MinNonceLen, qc.NonceLen)
		}
		if qc.ServerIDLen >= quiclb.MinServerIDLen && qc.NonceLen >= quiclb.MinNonceLen && qc.ServerIDLen+qc.NonceLen > quiclb.MaxIDNonceLen {
			c.errorf(cp+".nonce_len", "server_id_len + nonce_len is %d; at most %d (a QUIC v1 connection ID has 20 octets, one of them the first octet)", qc.ServerIDLen+qc.NonceLen, quiclb.MaxIDNonceLen)
		}
		if qc.KeyFile != "" {
			c.readKey(cp+".key_file", qc)
		}
	}
	for i := range v.Backends {
		b := &v.Backends[i]
		bp := fmt.Sprintf("%s.backend[%d].quic_lb_server_ids", strings.TrimSuffix(p, ".quic_lb"), i)
		for rot, id := range b.QUICLBServerIDs {
			qc, ok := byRot[int(rot)]
			switch {
			case !ok:
				c.errorf(bp, "configuration %d: the VIP has no such [[vip.quic_lb.config]]", rot)
			case len(id) != qc.ServerIDLen:
				c.errorf(bp, "configuration %d: server ID %x has %d octets; that configuration's server_id_len is %d", rot, id, len(id), qc.ServerIDLen)
			}
		}
	}
	for rot := range byRot {
		seen := make(map[string]int)
		missing := 0
		for i := range v.Backends {
			id, ok := v.Backends[i].QUICLBServerIDs[uint8(rot)]
			if !ok {
				missing++
				continue
			}
			if j, dup := seen[string(id)]; dup {
				c.errorf(fmt.Sprintf("%s.backend[%d].quic_lb_server_ids", strings.TrimSuffix(p, ".quic_lb"), i), "configuration %d: server ID %x is backend[%d]'s too; each backend needs its own", rot, id, j)
			} else {
				seen[string(id)] = i
			}
		}
		if missing == len(v.Backends) && q.Enabled {
			c.warnf(fmt.Sprintf("%s.config", p), "no backend has a server ID for configuration %d: its connection IDs route nowhere (set quic_lb_server_ids in the backends)", rot)
		}
	}
}

// readKey reads a configuration's key from its file: 32 hex digits (the
// 16-octet AES-128 key; white space around them is ignored) or the 16
// octets themselves. A relative path is taken from the configuration
// file's directory. The key is never part of a message.
func (c *collector) readKey(key string, qc *QUICLBConfig) {
	path := qc.KeyFile
	if !filepath.IsAbs(path) && c.dir != "" {
		path = filepath.Join(c.dir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		c.errorf(key, "%v", err)
		return
	}
	if !fi.Mode().IsRegular() {
		c.errorf(key, "%s is not a regular file", path)
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		c.errorf(key, "%v", err)
		return
	}
	k := raw
	if t := bytes.TrimSpace(raw); len(t) == 2*quiclb.KeyLen {
		if d, err := hex.DecodeString(string(t)); err == nil {
			k = d
		}
	}
	if len(k) != quiclb.KeyLen {
		c.errorf(key, "%s must hold a %d-octet AES-128 key: %d hex digits, or the %d octets themselves (it has %d octets)", path, quiclb.KeyLen, 2*quiclb.KeyLen, quiclb.KeyLen, len(raw))
		return
	}
	if fi.Mode().Perm()&0o077 != 0 {
		c.warnf(key, "%s is readable by others than its owner (mode %04o): chmod 600 it", path, fi.Mode().Perm())
	}
	qc.Key = Key(k)
}
