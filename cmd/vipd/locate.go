package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/vipd/vipd/control/config"
)

// The client commands find the running vipd from their flags, else from
// -config FILE, of which they read [admin] alone (config.LocateAdmin): a
// file with errors elsewhere still leads them to vipd, which judges the
// file itself. A reload of a broken file is then refused by vipd, which
// says why and records it (the status banner, the reload counter and its
// alert), rather than failing in the client where nothing sees it.

// socketFor finds the admin socket: -socket, else -admin if it is a path,
// else [admin] socket of -config, else the default. When the file's
// [admin] cannot be read, the default stands in and a note on stderr
// says why.
func socketFor(socket, addr, cfgPath string, stderr io.Writer) (string, error) {
	switch {
	case socket != "":
		return socket, nil
	case addr != "" && filepath.IsAbs(addr):
		return addr, nil
	case addr != "":
		return "", fmt.Errorf("-admin %s: drains are not served over TCP (every local user, and every web page a browser on this box opens, can reach it); they go through vipd's admin socket: give -socket PATH or -config FILE, and run as root", addr)
	case cfgPath == "":
		return config.DefaultAdminSocket, nil
	}
	ep, err := config.LocateAdmin(cfgPath)
	if err != nil {
		return "", err
	}
	if ep.Note != "" {
		fmt.Fprintf(stderr, "note: %s; trying the default admin socket %s (-socket PATH names another)\n", ep.Note, ep.Socket)
	}
	if ep.Socket == "" {
		return "", fmt.Errorf("%s disables the admin socket ([admin] socket = \"\"): a vipd running on it takes no commands that change it; give -socket PATH if it runs with another file", cfgPath)
	}
	return ep.Socket, nil
}

// drainSocket is socketFor with its note on the process's standard error.
func drainSocket(socket, addr, cfgPath string) (string, error) {
	return socketFor(socket, addr, cfgPath, os.Stderr)
}

// adminAddr finds the read-only admin listener: -admin, else [admin]
// listen of -config, else the default; a note as socketFor's.
func adminAddr(addr, cfgPath string, stderr io.Writer) (string, error) {
	switch {
	case addr != "":
		return addr, nil
	case cfgPath == "":
		return config.DefaultAdminListen, nil
	}
	ep, err := config.LocateAdmin(cfgPath)
	if err != nil {
		return "", err
	}
	if ep.Note != "" {
		fmt.Fprintf(stderr, "note: %s; trying the default admin listener %s (-admin HOST:PORT names another)\n", ep.Note, ep.Listen)
	}
	if ep.Listen == "" {
		return "", fmt.Errorf("%s disables the admin server ([admin] listen = \"\")", cfgPath)
	}
	return ep.Listen, nil
}
