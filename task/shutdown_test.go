package task

import (
	"context"
	"testing"
	"time"
)

// Run's shutdown closes the server itself, and forgets it first: nothing
// closes it a second time (embed.Etcd.Close panics "close of closed
// channel": CI saw it when a Close that outlasted StopTimeout was followed
// by the kit's Stop). Red before: the process still held the server
// after Run returned.
func TestShutdownForgetsTheServerItCloses(t *testing.T) {
	k := newKit(t, "m0")
	m := k.member("m0", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); m.proc.Server() == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("the member never started etcd: %s", m.reason())
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s")
	}
	if m.proc.Server() != nil {
		t.Fatal("the process still holds the server Run's shutdown closed: a later Stop closes it again")
	}
	m.proc.Stop() // a no-op now
}
