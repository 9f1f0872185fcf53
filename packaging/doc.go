// Package packaging holds what `make deb` puts into vipd's Debian package
// besides the binaries: the systemd units, man pages (vipd(8),
// vipd-decap(8)), bash completion, copyright header and lintian overrides
// under deb/, the builder script mkdeb, the vipd.toml(5) generator mkman,
// the copyright generator mkcopyright, and the Grafana dashboard and
// Prometheus rules under monitoring/. It has no code; its tests build the
// package and check it (contents, control file, md5sums, the units under
// systemd-analyze verify, the packaged vipd -check on the packaged
// configuration, the man pages under man --warnings, lintian, the bash
// completion driven in bash), the alerting rules with promtool's unit
// tests (testdata/rules_test.yml), and the dashboard's layout and queries.
package packaging
