package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

func main() {
	header := flag.String("header", "packaging/deb/copyright.in", "the `file` with the header paragraph and vipd's own Files paragraph")
	flag.Parse()
	if err := run(os.Stdout, *header, flag.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "mkcopyright: %v\n", err)
		os.Exit(1)
	}
}

// module is one Go module compiled into the binaries.
type module struct{ path, version, dir string }

func run(w io.Writer, header string, pkgs []string) error {
	if len(pkgs) == 0 {
		return errors.New("no packages given")
	}
	head, err := os.ReadFile(header)
	if err != nil {
		return err
	}
	mods, err := modules(pkgs)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	out.Write(bytes.TrimRight(head, "\n"))
	out.WriteString("\n")
	// The toolchain that builds the package, not the one that built
	// mkcopyright (the same under go run, but go env says so).
	b, err := exec.Command("go", "env", "GOROOT", "GOVERSION").Output()
	if err != nil {
		return fmt.Errorf("go env: %v", err)
	}
	env := strings.Fields(string(b))
	if len(env) != 2 {
		return fmt.Errorf("go env GOROOT GOVERSION: %q", b)
	}
	used := map[string]bool{}
	if err := paragraph(&out, "go/*", "The Go runtime and standard library ("+env[1]+")", "the Go authors", filepath.Join(env[0], "LICENSE"), used); err != nil {
		return err
	}
	for _, m := range mods {
		lic, err := licenseFile(m.dir)
		if err != nil {
			return fmt.Errorf("%s %s: %v", m.path, m.version, err)
		}
		if err := paragraph(&out, m.path+"/*", "Go module "+m.path+" "+m.version, "the authors of "+m.path, lic, used); err != nil {
			return fmt.Errorf("%s %s: %v", m.path, m.version, err)
		}
	}
	// Licenses Debian ships in /usr/share/common-licenses are referred
	// to once, not copied into every paragraph.
	for _, name := range []string{"Apache-2.0", "MPL-2.0"} {
		if used[name] {
			fmt.Fprintf(&out, "\nLicense: %s\n On Debian systems, the complete text of the %s license can be found in\n \"/usr/share/common-licenses/%s\".\n", name, name, name)
		}
	}
	_, err = w.Write(out.Bytes())
	return err
}

// modules lists the non-main modules of pkgs and their dependencies,
// sorted by path, from go list.
func modules(pkgs []string) ([]module, error) {
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}\t{{.Version}}\t{{.Dir}}{{end}}{{end}}"}, pkgs...)...)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v", err)
	}
	var mods []module
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 {
			continue
		}
		if f[2] == "" {
			return nil, fmt.Errorf("module %s %s is not in the module cache: run go mod download", f[0], f[1])
		}
		m := module{f[0], f[1], f[2]}
		if !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
	}
	slices.SortFunc(mods, func(a, b module) int { return strings.Compare(a.path, b.path) })
	return mods, nil
}

// licenseFile finds a module's license file in its top directory.
func licenseFile(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		n := strings.ToUpper(e.Name())
		if !e.IsDir() && (strings.HasPrefix(n, "LICENSE") || strings.HasPrefix(n, "LICENCE") || strings.HasPrefix(n, "COPYING")) {
			return filepath.Join(dir, e.Name()), nil
		}
	}
	return "", errors.New("no LICENSE or COPYING file")
}

// classify names a license text by DEP-5 short name (Expat is the MIT
// license). inline says whether the text goes into the paragraph: the
// permissive licenses carry their holders' notices, which must ship.
func classify(text string) (name string, inline bool, err error) {
	flat := strings.Join(strings.Fields(text), " ")
	has := func(s string) bool { return strings.Contains(flat, s) }
	apache := has("Apache License") && has("Version 2.0")
	mit := has("Permission is hereby granted, free of charge")
	switch {
	case mit && apache:
		return "Expat and Apache-2.0", true, nil
	case apache:
		return "Apache-2.0", false, nil
	case has("Mozilla Public License") && has("2.0"):
		return "MPL-2.0", false, nil
	case mit:
		return "Expat", true, nil
	case has("Redistribution and use in source and binary forms"):
		if has("Neither the name") || has("names of its contributors") || has("name of the copyright holder") {
			return "BSD-3-Clause", true, nil
		}
		return "BSD-2-Clause", true, nil
	case has("Permission to use, copy, modify, and/or distribute"), has("Permission to use, copy, modify, and distribute"):
		return "ISC", true, nil
	}
	return "", false, errors.New("license not recognised: name it in packaging/mkcopyright")
}

// copyrightLine matches a license file's copyright notice, not the
// Apache license's template ("Copyright [yyyy] ...") or its prose.
var copyrightLine = regexp.MustCompile(`(?i)^\W*(copyright\s+(\(c\)|©|\d{4})|©\s*\d{4}).*`)

// holders returns the copyright notices of a license file, and of a
// NOTICE file beside it.
func holders(lic string, text []byte) []string {
	var out []string
	add := func(b []byte) {
		for line := range strings.SplitSeq(string(b), "\n") {
			line = strings.TrimSpace(line)
			if copyrightLine.MatchString(line) && !strings.Contains(line, "[yyyy]") && !strings.Contains(line, "{yyyy}") {
				line = strings.TrimLeft(line, "#/* ")
				if !slices.Contains(out, line) {
					out = append(out, line)
				}
			}
		}
	}
	add(text)
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(lic), "NOTICE")); err == nil {
		add(b)
	}
	return out
}

// paragraph writes one Files paragraph for the license file lic.
func paragraph(w *bytes.Buffer, files, comment, fallback, lic string, used map[string]bool) error {
	text, err := os.ReadFile(lic)
	if err != nil {
		return err
	}
	name, inline, err := classify(string(text))
	if err != nil {
		return err
	}
	if !inline {
		used[name] = true
	}
	who := holders(lic, text)
	if len(who) == 0 {
		who = []string{fallback}
	}
	fmt.Fprintf(w, "\nFiles: %s\nCopyright: %s\n", files, strings.Join(who, "\n "))
	fmt.Fprintf(w, "License: %s\n", name)
	if inline {
		writeText(w, string(text))
	}
	fmt.Fprintf(w, "Comment: %s, compiled into /usr/sbin/vipd and /usr/sbin/vipd-decap.\n", comment)
	return nil
}

// writeText writes a license text as DEP-5 continuation lines: each
// indented by one space, an empty line as " .".
func writeText(w *bytes.Buffer, text string) {
	lines := strings.Split(strings.Trim(strings.ReplaceAll(text, "\r", ""), "\n"), "\n")
	for _, l := range lines {
		l = strings.TrimRight(strings.ReplaceAll(l, "\t", "    "), " ")
		if l == "" {
			w.WriteString(" .\n")
		} else {
			fmt.Fprintf(w, " %s\n", l)
		}
	}
}
