package procstat

import (
	"os"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	rss, err := ParseRSS("Name:\tetcd\nVmPeak:\t  900 kB\nVmRSS:\t   81234 kB\nThreads:\t12\n")
	if err != nil || rss != 81234*1024 {
		t.Errorf("ParseRSS = %d, %v", rss, err)
	}
	if _, err := ParseRSS("Name:\tkthreadd\n"); err == nil {
		t.Error("ParseRSS without VmRSS: no error")
	}
	// A command name with spaces and a parenthesis must not shift fields.
	stat := "4242 (etcd (x) y) S 1 4242 4242 0 -1 4194304 96 0 0 0 250 130 0 0 20 0 12 0 1081967 3133440 382"
	d, err := ParseCPUTime(stat)
	if err != nil || d != 3800*time.Millisecond {
		t.Errorf("ParseCPUTime = %s, %v, want 3.8s", d, err)
	}
	if _, err := ParseCPUTime("4242 (etcd) S 1"); err == nil {
		t.Error("short stat: no error")
	}
}

func TestSelf(t *testing.T) {
	rss, err := RSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("RSS of self = %d, %v", rss, err)
	}
	// Burn CPU until the kernel's 10 ms accounting shows some, or give up.
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, err := CPUTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if d > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("CPUTime of self still 0 after 5s of busy work")
		}
		for start := time.Now(); time.Since(start) < 20*time.Millisecond; {
		}
	}
}
