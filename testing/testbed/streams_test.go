package testbed

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestStreams runs flows that need no network: Start waits for every
// first round, a failure after it makes the flow broken, one that stops
// making rounds is stalled, and the counts are the flows'.
func TestStreams(t *testing.T) {
	s := NewStreams(3)
	stall := make(chan struct{})
	err := s.Start("test", "nowhere", time.Minute, func(i int) {
		st := s.Stream(i)
		st.SetLocal(fmt.Sprintf("c%d", i))
		st.Answered(fmt.Sprintf("be%d", i%2))
		for round := 1; ; round++ {
			if i == 1 && round == 3 {
				st.Fail(errors.New("reset"))
				return
			}
			st.Round()
			if i == 2 && round == 2 {
				<-stall // no more rounds, alive
			}
			select {
			case <-st.Stopped():
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 || !maps.Equal(s.Backends(), map[string]int{"be0": 2, "be1": 1}) {
		t.Errorf("Len %d, Backends %v; want 3 and be0: 2, be1: 1", s.Len(), s.Backends())
	}
	var broken []string
	for range 100 { // until flow 1 has failed and flow 2 stalled
		if broken = s.Settle(20 * time.Millisecond); len(broken) == 2 {
			break
		}
	}
	want := []string{"c1 (backend be1) after 2 rounds: reset", "c2 (backend be0) stalled after 2 rounds"}
	if !slices.Equal(broken, want) {
		t.Errorf("Settle = %q, want %q", broken, want)
	}
	close(stall)
	s.Finish()
	s.Finish()
	if p := s.Stream(1).Progress(); !p.Dead || p.Rounds != 2 {
		t.Errorf("flow 1: %+v, want dead after 2 rounds", p)
	}
}

// TestStreamsStart: a flow that fails before its first round, or does
// not complete one within patience, fails Start, which stops the others.
func TestStreamsStart(t *testing.T) {
	s := NewStreams(2)
	err := s.Start("test", "nowhere", time.Minute, func(i int) {
		st := s.Stream(i)
		if i == 1 {
			st.Fail(errors.New("refused"))
			return
		}
		st.Round()
		<-st.Stopped()
	})
	if want := "test flow to nowhere did not start: refused"; err == nil || err.Error() != want {
		t.Errorf("Start = %v, want %q", err, want)
	}
	s = NewStreams(1)
	err = s.Start("test", "nowhere", 10*time.Millisecond, func(i int) { <-s.Stream(i).Stopped() })
	if want := "only 0 of 1 test flows to nowhere started within 10ms"; err == nil || err.Error() != want {
		t.Errorf("Start = %v, want %q", err, want)
	}
}

// TestStreamEcho runs Echo over in-memory pipes: a faithful echo server
// keeps its flow going, one that corrupts its third answer breaks it, and
// first runs once, between the first write and its echo.
func TestStreamEcho(t *testing.T) {
	s := NewStreams(2)
	var firsts atomic.Int32
	err := s.Start("test", "a pipe", time.Minute, func(i int) {
		c, srv := net.Pipe()
		defer c.Close()
		go func() {
			defer srv.Close()
			b := make([]byte, 16)
			for round := 1; ; round++ {
				if _, err := io.ReadFull(srv, b); err != nil {
					return
				}
				if i == 1 && round == 3 {
					b[0]++
				}
				if _, err := srv.Write(b); err != nil {
					return
				}
			}
		}()
		st := s.Stream(i)
		st.SetLocal(fmt.Sprintf("c%d", i))
		st.Echo(c, c, rand.New(rand.NewPCG(uint64(i), 1)), 16, func() error {
			firsts.Add(1)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	var broken []string
	for range 10 { // rounds are roundGap apart: 3 take some 200 ms
		if broken = s.Settle(5 * time.Second); len(broken) > 0 {
			break
		}
	}
	s.Finish()
	if want := []string{"c1 (backend ) after 2 rounds: the echo differs from what was sent"}; !slices.Equal(broken, want) {
		t.Errorf("broken %q, want %q", broken, want)
	}
	if p := s.Stream(0).Progress(); p.Dead || p.Rounds < 2 {
		t.Errorf("the faithful flow: %+v, want alive after 2 rounds or more", p)
	}
	if n := firsts.Load(); n != 2 {
		t.Errorf("first ran %d times, want once per flow", n)
	}
}
