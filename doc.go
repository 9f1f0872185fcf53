// Package vipd holds no code. vipd is a userspace L4 load balancer; its
// packages are laid out by layer (docs/architecture.md, "The tree by
// layer"), and this package's test, layers_test.go, is where the build
// enforces the layers: a table of imports that must never happen, checked
// over the module's whole import graph by make test.
package vipd
