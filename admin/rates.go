package admin

// Rates are a VIP's or a backend's traffic per second over the daemon's
// last sampling interval (one second; daemon/rates.go).
type Rates struct {
	PacketsPerSec  float64 `json:"packets_per_sec"`
	BytesPerSec    float64 `json:"bytes_per_sec"`
	NewFlowsPerSec float64 `json:"new_flows_per_sec"`
}

// WorkerState is one worker (one queue) in State.Workers, its rates over
// the last sampling interval: frames received, frames sent (forwarded and
// NAT replies) and drops per second by reason.
type WorkerState struct {
	Queue        int                `json:"queue"`
	RxPerSec     float64            `json:"rx_packets_per_sec"`
	TxPerSec     float64            `json:"tx_packets_per_sec"`
	DropsPerSec  map[string]float64 `json:"drops_per_sec,omitempty"`
	RxPackets    uint64             `json:"rx_packets"`
	DroppedTotal uint64             `json:"dropped"`
}
