package localmode

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// FreePorts returns n distinct free TCP ports on 127.0.0.1.
//
// A port found free is closed again before its user binds it, so two
// callers could be handed the same port: two test processes running side
// by side (CI lost a run to "bind: address already in use" on a port one
// package's etcd member had been given while another package's member was
// about to bind it), or one process handing out a port it gave a member
// that is restarting. Each port handed out is therefore leased for
// portLease: in this process (a set) and across processes (a file per
// port under the temporary directory, written under flock). A leased
// port is skipped while others are free; when every port of the range is
// leased the leases are ignored rather than failing.
func FreePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	var out []int
	limit := 4 * (portHigh - portLow)
	for tries := 0; len(out) < n; tries++ {
		if tries > 2*limit {
			return nil, fmt.Errorf("find a free port: %d of %d found in %d..%d", len(out), n, portLow, portHigh-1)
		}
		p := portLow + rand.IntN(portHigh-portLow)
		if tries < limit && !leasePort(p) {
			continue // handed out lately, here or by another process
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken (or held above for this call)
		}
		lns = append(lns, l)
		out = append(out, p)
	}
	return out, nil
}

// Ports are chosen at random in [portLow, portHigh): below the kernel's
// ephemeral range (32768-60999 by default), where every outgoing
// connection takes its source port, so that a port found free and closed
// again is not taken by a connection before its user binds it ("bind:
// address already in use" in CI under load: a seeder's start retried 17
// times, a test's listener failed); and below the Nomad agents' dynamic
// port ranges, which hand ports to allocations without asking the kernel:
// 20000-32000 (a -dev agent's), 15000-19999 (devagents' server-mode
// agent: a chaos run's Consul, restarted on its ports, found one taken
// by a member's allocation and exited).
const portLow, portHigh = 10000, 15000

// portLease is how long a port handed out is not handed out again: long
// enough for its user to bind it, and for a member stopped and started
// again on its ports within one test.
const portLease = 5 * time.Minute

var leased = struct {
	sync.Mutex
	at map[int]time.Time
}{at: map[int]time.Time{}}

// leaseDir holds one file per port handed out, its modification time the
// lease's start; shared by every process of this user on the machine.
func leaseDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("etcd-nomad-ports-%d", os.Getuid()))
}

// leasePort takes port p's lease, reporting false when this process or
// another holds it. An error reading or writing the lease files takes the
// lease: they only make a collision unlikely; the listen that follows is
// what says the port is free now.
func leasePort(p int) bool {
	now := time.Now()
	leased.Lock()
	defer leased.Unlock()
	if at, ok := leased.at[p]; ok && now.Sub(at) < portLease {
		return false
	}
	if !leaseFile(p, now) {
		return false
	}
	leased.at[p] = now
	return true
}

func leaseFile(p int, now time.Time) bool {
	dir := leaseDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return true
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return true
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	fi, err := f.Stat()
	if err == nil && fi.Size() > 0 && now.Sub(fi.ModTime()) < portLease && fi.ModTime().Sub(now) < time.Minute {
		return false
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return true
	}
	_ = os.Chtimes(f.Name(), now, now)
	return true
}
