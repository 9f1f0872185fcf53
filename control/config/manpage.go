package config

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// The man page vipd.toml(5) is generated from the schema and the comments
// of config.toml.example: the comment block above a key (or a table
// header), plus the comment after its value, is that key's documentation.
// A schema key (tables aside) without one is an error, so a new key cannot ship without
// its page.

var (
	exampleTable = regexp.MustCompile(`^(?:# )?\[\[?([a-z_.]+)\]\]?\s*$`)
	exampleKey   = regexp.MustCompile(`^(?:# ?)?([a-z_][a-z0-9_]*) = ([^#]*?)\s*(?:#\s*(.*))?$`)
)

// exampleDocs returns the documentation of every table and key of example
// by dotted schema path ("vip.healthcheck.rise").
func exampleDocs(example string) map[string][]string {
	docs := map[string][]string{}
	var block []string // the comment lines since the last key or table
	used := false      // block documented a key: the next comment starts a new one
	table := ""
	sc := bufio.NewScanner(strings.NewReader(example))
	for sc.Scan() {
		line := sc.Text()
		if m := exampleTable.FindStringSubmatch(line); m != nil {
			table = m[1]
			if _, ok := docs[table]; !ok || len(block) > 0 && !used {
				docs[table] = trimBlank(block)
			}
			block, used = nil, true
			continue
		}
		if m := exampleKey.FindStringSubmatch(line); m != nil {
			path := m[1]
			if table != "" {
				path = table + "." + m[1]
			}
			doc := append([]string{}, trimBlank(block)...)
			if m[3] != "" {
				doc = append(doc, m[3]+".")
			}
			if _, ok := docs[path]; !ok {
				docs[path] = doc
			}
			used = true
			continue
		}
		switch {
		case strings.HasPrefix(line, "#"):
			if used {
				block, used = nil, false
			}
			block = append(block, strings.TrimPrefix(strings.TrimPrefix(line, "#"), " "))
		case strings.TrimSpace(line) == "":
			block, used = nil, false
		}
	}
	return docs
}

func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// WriteManPage writes vipd.toml(5) in troff (man macros), documenting
// every key of the schema with its comments in example (the text of
// config.toml.example). It fails, naming them, when keys have none.
func WriteManPage(w io.Writer, example, version string) error {
	docs := exampleDocs(example)
	var missing []string
	for _, k := range schemaKeys() {
		if !k.Table && len(docs[k.Path]) == 0 {
			missing = append(missing, k.Path)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("config.toml.example documents no comment for %s", strings.Join(missing, ", "))
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, ".TH VIPD.TOML 5 \"\" \"vipd %s\" \"File Formats\"\n", roff(version))
	b.WriteString(".SH NAME\nvipd.toml \\- vipd configuration file\n")
	b.WriteString(".SH SYNOPSIS\n/etc/vipd/vipd.toml\n")
	b.WriteString(".SH DESCRIPTION\n" +
		"vipd reads one TOML file, given with \\fB\\-config\\fR. Unknown keys are errors. " +
		"\\fBvipd \\-check \\-config\\fR \\fIFILE\\fR validates a file; SIGHUP reloads it " +
		"(a file that does not validate keeps the running configuration; [dataplane], " +
		"[conntrack] and [admin] take effect only at start). " +
		"/usr/share/doc/vipd/examples/vipd.toml is a complete example.\n" +
		".PP\nThe tables and keys follow, in the order of the schema. " +
		"[[vip]] and [[vip.backend]] are arrays of tables: one per VIP and per backend.\n")
	for _, k := range schemaKeys() {
		if k.Table {
			fmt.Fprintf(b, ".SH [%s]\n", strings.ToUpper(roff(k.Path)))
		} else {
			fmt.Fprintf(b, ".TP\n.B %s\n", roff(k.Path))
		}
		for _, l := range docs[k.Path] {
			if strings.TrimSpace(l) == "" {
				b.WriteString(".IP\n")
				continue
			}
			b.WriteString(roff(l) + "\n")
		}
	}
	b.WriteString(".SH SEE ALSO\n.BR vipd (8)\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// roff escapes a line of text for troff: backslashes, and a leading dot or
// quote that would read as a request.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
