// Package api holds the wire types of vipd's admin API: the JSON bodies
// the server (package admin) answers and takes, which the client (package
// admin/client) and every other reader decode, and the pure helpers both
// sides use: the forgiving names of VIPs and backends (ResolveVIP,
// ResolveBackend), HostPort, the role and box-drain words.
//
//	GET  /v1/state       State
//	GET  /v1/where       WhereAnswer
//	GET  /v1/conns       Conns (the query: ConnsQuery)
//	POST /v1/drain       DrainRequest; answers "ok"
//	POST /v1/drain-box   BoxDrainRequest; BoxDrainAnswer
//	POST /v1/override    OverrideRequest; OverrideAnswer
//	POST /v1/reload      {}; ReloadResult, 200 applied or 422 refused
//	POST /v1/role        RoleRequest; RoleAnswer
//
// A request that fails is answered with an HTTP status and the error's
// text, plain, not JSON: 404 for ErrNotFound (a *NameError wraps it), 409
// for ErrConflict and ErrNoBGP, 400 for ErrInvalid; package admin lists
// the others.
//
// The package imports no data-plane package, so that a client links
// nothing of the engine (layers_test.go, TestLayers); where the daemon holds a
// data-plane value, the server converts it to the type here, field for
// field (ConntrackStats). The JSON is the contract: TestWireGolden pins
// every body's encoding in testdata/wire.golden.
package api
