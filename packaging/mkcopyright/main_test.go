package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		text, name string
		inline     bool
	}{
		{"MIT License\n\nPermission is hereby granted, free of charge, to any person", "Expat", true},
		{"Redistribution and use in source and binary forms ... Neither the name of Google", "BSD-3-Clause", true},
		{"Redistribution and use in source and\n binary forms, with or without modification", "BSD-2-Clause", true},
		{"                                 Apache License\n                           Version 2.0, January 2004", "Apache-2.0", false},
		{"MIT: Permission is hereby granted, free of charge ... Apache License, Version 2.0", "Expat and Apache-2.0", true},
		{"Mozilla Public License Version 2.0", "MPL-2.0", false},
		{"Permission to use, copy, modify, and/or distribute this software", "ISC", true},
	} {
		name, inline, err := classify(tc.text)
		if err != nil || name != tc.name || inline != tc.inline {
			t.Errorf("classify(%.40q) = %q, %v, %v; want %q, %v", tc.text, name, inline, err, tc.name, tc.inline)
		}
	}
	// A license it cannot name fails, rather than ship unnamed.
	if name, _, err := classify("All rights reserved. Do whatever."); err == nil {
		t.Errorf("an unknown license was classified %q", name)
	}
}

func TestParagraph(t *testing.T) {
	dir := t.TempDir()
	lic := filepath.Join(dir, "LICENSE")
	text := "Copyright (c) 2020 A. Author\nCopyright 2021 B. Author\n\nPermission is hereby granted, free of charge,\tto anyone.\n"
	if err := os.WriteFile(lic, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	used := map[string]bool{}
	if err := paragraph(&out, "example.org/m/*", "Go module example.org/m v1.0.0", "the authors", lic, used); err != nil {
		t.Fatal(err)
	}
	want := "\nFiles: example.org/m/*\nCopyright: Copyright (c) 2020 A. Author\n Copyright 2021 B. Author\nLicense: Expat\n" +
		" Copyright (c) 2020 A. Author\n Copyright 2021 B. Author\n .\n Permission is hereby granted, free of charge,    to anyone.\n" +
		"Comment: Go module example.org/m v1.0.0, compiled into /usr/sbin/vipd and /usr/sbin/vipd-decap.\n"
	if out.String() != want {
		t.Errorf("paragraph:\n%s\nwant:\n%s", out.String(), want)
	}
	// An Apache license without a copyright line: the fallback holder,
	// the text left to /usr/share/common-licenses.
	if err := os.WriteFile(lic, []byte("Apache License\nVersion 2.0\nCopyright [yyyy] [name of copyright owner]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := paragraph(&out, "x/*", "c", "the authors of x", lic, used); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Copyright: the authors of x\nLicense: Apache-2.0\nComment:") || !used["Apache-2.0"] {
		t.Errorf("Apache paragraph:\n%s (used %v)", out.String(), used)
	}
}
