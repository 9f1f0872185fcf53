package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/vipd/vipd/dataplane/quiclb"
)

// ALPN is the application protocol the bed's QUIC clients speak.
const ALPN = "vipd-test"

// lbConfig is one -quiclb flag.
type lbConfig struct {
	cfg quiclb.Config
	sid []byte
}

type lbFlags []lbConfig

func (f *lbFlags) String() string { return fmt.Sprint(len(*f), " configurations") }

func (f *lbFlags) Set(s string) error {
	parts := strings.Split(s, ":")
	if len(parts) != 4 && len(parts) != 5 {
		return errors.New("want ROTATION:SERVER_ID_LEN:NONCE_LEN:SERVER_ID_HEX[:KEY_FILE]")
	}
	var n [3]int
	for i := range n {
		v, err := strconv.Atoi(parts[i])
		if err != nil {
			return err
		}
		n[i] = v
	}
	sid, err := hex.DecodeString(parts[3])
	if err != nil {
		return fmt.Errorf("server ID: %v", err)
	}
	c := quiclb.Config{Rotation: uint8(n[0]), ServerIDLen: n[1], NonceLen: n[2]}
	if len(parts) == 5 {
		b, err := os.ReadFile(parts[4])
		if err != nil {
			return err
		}
		if c.Key, err = hex.DecodeString(strings.TrimSpace(string(b))); err != nil {
			return fmt.Errorf("key file %s: %v", parts[4], err)
		}
	}
	if err := c.Validate(); err != nil {
		return err
	}
	*f = append(*f, lbConfig{c, sid})
	return nil
}

// cidGen adapts quiclb's Generator to quic-go's ConnectionIDGenerator.
type cidGen struct{ g *quiclb.Generator }

var _ quic.ConnectionIDGenerator = cidGen{}

func (c cidGen) GenerateConnectionID() (quic.ConnectionID, error) {
	b, err := c.g.GenerateConnectionID()
	return quic.ConnectionIDFromBytes(b), err
}

func (c cidGen) ConnectionIDLen() int { return c.g.ConnectionIDLen() }

func main() {
	name := flag.String("name", "quicbackend", "name to answer each stream with")
	listen := flag.String("listen", ":4433", "comma-separated UDP listen addresses")
	var lbs lbFlags
	flag.Var(&lbs, "quiclb", "a QUIC-LB configuration and this server's ID in it, ROTATION:SERVER_ID_LEN:NONCE_LEN:SERVER_ID_HEX[:KEY_FILE] (repeatable; the first issues IDs)")
	switchFile := flag.String("switch-file", "", "when this file exists, issue IDs of the second -quiclb configuration")
	resetKey := flag.String("reset-key", "", "stateless reset key, any text (hashed); empty: none")
	flag.Parse()
	log.SetPrefix(*name + ": ")

	tlsConf, err := selfSigned()
	if err != nil {
		log.Fatal(err)
	}
	var gen *quiclb.Generator
	if len(lbs) > 0 {
		if gen, err = quiclb.NewGenerator(lbs[0].cfg, lbs[0].sid); err != nil {
			log.Fatal(err)
		}
		log.Printf("issuing QUIC-LB connection IDs: %v, server ID %x", lbs[0].cfg, lbs[0].sid)
	}
	var srk *quic.StatelessResetKey
	if *resetKey != "" {
		k := quic.StatelessResetKey(sha256.Sum256([]byte(*resetKey)))
		srk = &k
	}
	qconf := &quic.Config{MaxIdleTimeout: time.Minute, KeepAlivePeriod: 0}
	for _, addr := range strings.Split(*listen, ",") {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			log.Fatal(err)
		}
		tr := &quic.Transport{Conn: pc, StatelessResetKey: srk}
		if gen != nil {
			tr.ConnectionIDGenerator = cidGen{gen}
		}
		ln, err := tr.Listen(tlsConf, qconf)
		if err != nil {
			log.Fatal(err)
		}
		log.Printf("listening on udp %s", pc.LocalAddr())
		go serve(ln, *name)
	}
	if *switchFile != "" && len(lbs) > 1 {
		go func() {
			for {
				if _, err := os.Stat(*switchFile); err == nil {
					if err := gen.Switch(lbs[1].cfg, lbs[1].sid); err != nil {
						log.Fatalf("switch: %v", err)
					}
					log.Printf("switched: issuing %v, server ID %x", lbs[1].cfg, lbs[1].sid)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
}

func serve(ln *quic.Listener, name string) {
	for {
		conn, err := ln.Accept(context.Background())
		if err != nil {
			log.Printf("accept: %v", err)
			return
		}
		go func() {
			for {
				s, err := conn.AcceptStream(context.Background())
				if err != nil {
					return // the connection ended
				}
				go func() {
					defer s.Close()
					if _, err := io.WriteString(s, name+"\n"); err != nil {
						return
					}
					io.Copy(s, s)
				}()
			}
		}()
	}
}

// selfSigned makes a TLS configuration with a fresh self-signed
// certificate (the bed's clients skip verification).
func selfSigned() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), DNSNames: []string{"vipd-test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{ALPN}}, nil
}
