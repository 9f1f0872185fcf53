package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/vipd/vipd/testing/testbed/stream"
)

func main() {
	name := flag.String("name", "backend", "name to answer with")
	httpAddrs := flag.String("http", ":8080", "comma-separated HTTP listen addresses")
	udpAddr := flag.String("udp", "", "UDP echo listen address (empty: none)")
	drainFile := flag.String("drain-file", "", "drain while this file exists")
	echoAddr := flag.String("echo", "", "TCP echo listen address (empty: none): each connection gets the name and a newline, then its own bytes back")
	loadFile := flag.String("load-file", "", "while this file exists, /healthz answers with its content (trimmed) in header X-Load")
	failFile := flag.String("fail-file", "", "while this file holds a number N > 0, every Nth /healthz answers 500")
	flag.Parse()
	var checks atomic.Int64

	var draining atomic.Bool
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for s := range sigs {
			draining.Store(s == syscall.SIGUSR1)
		}
	}()
	isDraining := func() bool {
		if draining.Load() {
			return true
		}
		if *drainFile != "" {
			_, err := os.Stat(*drainFile)
			return err == nil
		}
		return false
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, *name)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		n := checks.Add(1)
		if b, err := os.ReadFile(*loadFile); *loadFile != "" && err == nil {
			w.Header().Set("X-Load", strings.TrimSpace(string(b)))
		}
		if b, err := os.ReadFile(*failFile); *failFile != "" && err == nil {
			if every, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); every > 0 && n%every == 0 {
				http.Error(w, "failing on purpose", http.StatusInternalServerError)
				return
			}
		}
		if isDraining() {
			w.Header().Set("X-Drain", "1")
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /bytes", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "want ?n=BYTES", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		w.Header().Set("X-Backend", *name)
		io.CopyN(w, stream.New(), n)
	})
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%s %d %s\n", *name, n, hex.EncodeToString(h.Sum(nil)))
	})
	errc := make(chan error, 4)
	for _, a := range strings.Split(*httpAddrs, ",") {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			log.Fatalf("backend %s: %v", *name, err)
		}
		go func() { errc <- http.Serve(ln, mux) }()
	}
	if *echoAddr != "" {
		ln, err := net.Listen("tcp", *echoAddr)
		if err != nil {
			log.Fatalf("backend %s: %v", *name, err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					errc <- err
					return
				}
				go func() {
					defer c.Close()
					fmt.Fprintln(c, *name)
					io.Copy(c, c)
				}()
			}
		}()
	}
	if *udpAddr != "" {
		pc, err := net.ListenPacket("udp", *udpAddr)
		if err != nil {
			log.Fatalf("backend %s: %v", *name, err)
		}
		go func() {
			buf := make([]byte, 65536)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					errc <- err
					return
				}
				pc.WriteTo(append([]byte(*name+":"), buf[:n]...), from)
			}
		}()
	}
	log.Fatalf("backend %s: %v", *name, <-errc)
}
