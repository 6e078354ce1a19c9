package actors

import (
	"context"
	"errors"
	"testing"
	"time"
)

// silentTransport never answers a pass: every wait ends another way.
type silentTransport struct{ gaveUp chan error }

func (silentTransport) CheckPass(o *Orchestration, rank, round int) error {
	if rank > 3 {
		return errors.Join(ErrInvalidPass, errors.New("four ranks"))
	}
	return nil
}

func (s silentTransport) SendPass(context.Context, *Orchestration, int, int) (PassTicket, error) {
	return silentTicket(s), nil
}

type silentTicket silentTransport

func (silentTicket) Reply() <-chan *PassResult { return nil }
func (silentTicket) Answered(*PassResult)      {}
func (t silentTicket) GiveUp(err error) <-chan *PassResult {
	t.gaveUp <- err
	return nil
}

// TestPassCallerEnds: the one caller side of a pass (local and remote)
// ends every wait: at the transport's stop with ErrStopped, at the
// caller's ctx, at its timeout; each time the transport is told to let the
// pass go, and after the stop nothing is sent.
func TestPassCallerEnds(t *testing.T) {
	orch := keysModel{keys: 1, calls: 1}.orchestration("silent")
	for _, tc := range []struct {
		name string
		want error
		end  func(stop chan struct{}, cancel context.CancelFunc)
		wait time.Duration
	}{
		{"stopped", ErrStopped, func(stop chan struct{}, _ context.CancelFunc) { close(stop) }, time.Hour},
		{"ctx", context.Canceled, func(_ chan struct{}, cancel context.CancelFunc) { cancel() }, time.Hour},
		{"timeout", context.DeadlineExceeded, func(chan struct{}, context.CancelFunc) {}, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := silentTransport{gaveUp: make(chan error, 1)}
			stop := make(chan struct{})
			c := &PassCaller{Transport: tr, Timeout: tc.wait, Stopped: stop}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p, err := c.Ask(ctx, orch, 1, 2)
			if err != nil {
				t.Fatal(err)
			}
			tc.end(stop, cancel)
			done := make(chan error, 1)
			go func() { _, err := p.Wait(ctx); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, tc.want) || err.Error()[:14] != "rank 1 round 2" {
					t.Fatalf("wait: %v, want %v naming rank 1 round 2", err, tc.want)
				}
			case <-time.After(prompt):
				t.Fatal("the wait did not end")
			}
			if err := <-tr.gaveUp; !errors.Is(err, tc.want) {
				t.Errorf("gave up with %v", err)
			}
		})
	}
	c := &PassCaller{Transport: silentTransport{}, Timeout: time.Hour, Stopped: closed()}
	if _, err := c.Ask(context.Background(), orch, 0, 0); !errors.Is(err, ErrStopped) {
		t.Errorf("a pass after the stop: %v, want ErrStopped", err)
	}
	if _, err := c.Ask(context.Background(), orch, 4, 0); !errors.Is(err, ErrInvalidPass) {
		t.Errorf("the transport's own check: %v, want ErrInvalidPass", err)
	}
}

func closed() chan struct{} { c := make(chan struct{}); close(c); return c }
