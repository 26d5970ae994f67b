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
	inCwd := exec.Command("sleep", "300") // a logmon: no path, its cwd is the agent's
	inCwd.Dir = dir
	outside := exec.Command("sh", "-c", "sleep 300 # "+filepath.Join(other, "y"))
	for _, c := range []*exec.Cmd{inside, inCwd, outside} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		c := c
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	exited := make(chan struct{})
	go func() { _ = inside.Wait(); _ = inCwd.Wait(); close(exited) }()
	found := KillUnder(dir)
	if len(found) < 2 {
		t.Fatalf("found %v, want the process naming %s and the one running in it", found, dir)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("a process naming the dir, or running in it, still runs")
	}
	if err := outside.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the process elsewhere was killed: %v", err)
	}
}
