package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/vipd/vipd/control/fleet"
)

// writeFleetStatus prints fleet status's table: a row per live box (its
// revision and how long ago it applied it, readiness, role, whether it is
// stale, its last error), flagging a box that lags the latest change,
// then a line per problem Agree found, or that every box agrees. It
// returns fleet status's exit status: 0 when every live box applied the
// latest change and every VIP has one table, else 1.
func writeFleetStatus(w io.Writer, boxes []fleet.BoxStatus, a *fleet.Agreement, now time.Time) int {
	lag := map[string]bool{}
	for _, b := range a.Lagging {
		lag[b] = true
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BOX\tREVISION\tAPPLIED\tREADY\tROLE\tSTALE\tERROR")
	for _, b := range boxes {
		rev := strconv.FormatInt(b.Revision, 10)
		if lag[b.Box] {
			rev += " (lags)"
		}
		errText := b.LastError
		if b.Refused != 0 {
			errText = fmt.Sprintf("refused %d: %s", b.Refused, b.LastError)
		}
		if b.Divergent {
			errText = joinNote(errText, "per-box overrides")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s ago\t%v\t%s\t%v\t%s\n", b.Box, rev, now.Sub(b.Applied).Round(time.Second), b.Ready, b.Role, b.Stale, errText)
	}
	tw.Flush()
	problems := a.Summary()
	if len(boxes) == 0 {
		fmt.Fprintln(w, "no live box")
	}
	for _, p := range problems {
		fmt.Fprintln(w, p)
	}
	if len(problems) > 0 {
		return 1
	}
	if len(boxes) > 0 {
		fmt.Fprintf(w, "every live box applied revision %d and builds the same tables\n", a.Latest)
	}
	return 0
}

// joinNote appends note to s, "; "-separated.
func joinNote(s, note string) string {
	if s == "" {
		return note
	}
	return s + "; " + note
}
