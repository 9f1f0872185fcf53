// Package packaging holds what `make deb` puts into vipd's Debian package
// besides the binaries: the systemd units and man page under deb/, the
// builder script mkdeb, the vipd.toml(5) generator mkman, and the Grafana
// dashboard and Prometheus rules under monitoring/. It has no code; its
// test builds the package and checks it (contents, control file, the
// units under systemd-analyze verify, the packaged vipd -check on the
// packaged configuration).
package packaging
