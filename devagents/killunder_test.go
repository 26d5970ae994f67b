package devagents

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// KillUnder is the safety net behind Stop: a process whose command line
// names the agent's directory (an executor, a logmon, a task) is killed,
// one elsewhere is left alone.
func TestKillUnderKillsOnlyWhatNamesTheDir(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	inside := exec.Command("sh", "-c", "sleep 300 # "+filepath.Join(dir, "alloc", "x"))
	outside := exec.Command("sh", "-c", "sleep 300 # "+filepath.Join(other, "y"))
	for _, c := range []*exec.Cmd{inside, outside} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		c := c
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	exited := make(chan struct{})
	go func() { _ = inside.Wait(); close(exited) }()
	found := KillUnder(dir)
	if len(found) != 1 {
		t.Fatalf("found %v, want exactly the process naming %s", found, dir)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the process naming the dir still runs")
	}
	if err := outside.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the process elsewhere was killed: %v", err)
	}
}
