package api

// ReloadResult is the answer of POST /v1/reload: what the reload changed,
// or every reason it was refused (then the running configuration stays).
type ReloadResult struct {
	OK   bool   `json:"ok"`
	File string `json:"file"`
	// What an applied reload changed.
	VIPsAdded       []string     `json:"vips_added,omitempty"`
	VIPsRemoved     []string     `json:"vips_removed,omitempty"`
	BackendsAdded   []BackendRef `json:"backends_added,omitempty"`
	BackendsRemoved []BackendRef `json:"backends_removed,omitempty"`
	Reweighted      []Reweight   `json:"reweighted,omitempty"`
	// Changed are the other keys that differ, each as
	// `[table] key changed (old → new)`.
	Changed []string `json:"changed,omitempty"`
	// Errors, of a refused reload, one entry each: "file:line: key:
	// message" for the file's errors, `[table] key changed (old → new):
	// needs a restart` for a key a reload cannot apply.
	Errors []string `json:"errors,omitempty"`
	// Warnings about the new file (legal but questionable settings).
	Warnings []string `json:"warnings,omitempty"`
}

// BackendRef names a backend of a VIP: Backend is "addr:port", or
// "addr" for one that keeps the client's port.
type BackendRef struct {
	VIP     string `json:"vip"`
	Backend string `json:"backend"`
}

// Reweight is a backend whose configured weight a reload changed.
type Reweight struct {
	BackendRef
	Old uint32 `json:"old"`
	New uint32 `json:"new"`
}
