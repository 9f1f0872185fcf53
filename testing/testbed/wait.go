package testbed

import "time"

// patience bounds the bed's waits for something that should happen (a
// process up, a reload counted, a flow started). A wait ends as soon as
// the thing happens, so a generous bound costs nothing then, and it
// leaves a machine whose CPUs are busy with other work the time it needs.
const patience = 60 * time.Second
