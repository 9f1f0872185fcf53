// Package client is the vipd commands' side of the admin API (package
// api has the bodies): reads from the admin server's TCP listener
// (FetchState, Where, FetchConns) and, over the admin socket, the state
// and the changes only the socket serves (Drain, DrainBox, SetOverride,
// Reload, SetRole).
//
// An answer other than 200 is an error carrying the server's text; a
// socket that cannot be reached is an error that says why (SocketError:
// no such file, nobody listening, not root). Like package api, it links
// nothing of the daemon nor of the server (layers_test.go, TestLayers).
package client
