package devagents

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// netnsPath is where `ip netns add` keeps a named network namespace.
func netnsPath(ns string) string { return filepath.Join("/run/netns", ns) }

// inNetns runs f on an OS thread that has entered the network namespace
// ns. The thread is never returned to the Go scheduler (the goroutine ends
// locked, so the runtime discards it): no other goroutine ever runs in ns
// by accident. What f creates there stays there: a socket keeps the
// namespace it was opened in, and a child process inherits the thread's.
func inNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(netnsPath(ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open network namespace %s: %w", ns, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", ns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// startIn starts cmd inside the network namespace ns (all other
// namespaces are this process's); without ns it is cmd.Start.
func startIn(ns string, cmd *exec.Cmd) error {
	if ns == "" {
		return cmd.Start()
	}
	return inNetns(ns, cmd.Start)
}

// dialIn opens a connection from inside the network namespace ns, as a
// process of that host would.
func dialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetns(ns, func() error {
		var err error
		// A literal address: the dial runs on this goroutine (no
		// resolver goroutine leaves the namespace).
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// netnsInode is the inode that identifies ns (what /proc/PID/ns/net of
// its processes links to).
func netnsInode(ns string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(netnsPath(ns), &st); err != nil {
		return 0, fmt.Errorf("network namespace %s: %w", ns, err)
	}
	return st.Ino, nil
}

// pidsInNetns lists the processes (but this one) that run in the network
// namespace ns.
func pidsInNetns(ns string) ([]int, error) {
	ino, err := netnsInode(ns)
	if err != nil {
		return nil, err
	}
	want := fmt.Sprintf("net:[%d]", ino)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "net")); err == nil && l == want {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// killNetns sends SIGKILL to every process in the network namespace ns
// until none is left (a dying Nomad client may still fork), waiting at most
// timeout. It returns what was still there at the deadline.
func killNetns(ns string, timeout time.Duration) ([]int, error) {
	deadline := time.Now().Add(timeout)
	for {
		pids, err := pidsInNetns(ns)
		if err != nil || len(pids) == 0 {
			return nil, err
		}
		if time.Now().After(deadline) {
			return pids, fmt.Errorf("network namespace %s: processes %v survive SIGKILL", ns, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ipCmd runs `ip args...` and returns its error with its output.
func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
