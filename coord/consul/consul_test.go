package consul

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/etcd-nomad/etcd-nomad/coord"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/internal/tier"
)

// When run with this variable set, the test binary is a lock holder
// process: it takes the lock, says so, and waits to be killed.
const holderEnv = "ETCD_NOMAD_TEST_LOCK_HOLDER"

func TestMain(m *testing.M) {
	if addr := os.Getenv(holderEnv); addr != "" {
		os.Exit(holdLock(addr, os.Getenv(holderEnv+"_PREFIX")))
	}
	os.Exit(tier.Main(m, run))
}

// run runs the tests, which start the package's Consul agent when they first
// need it (consulAgent), and stops it.
func run(m *testing.M) int {
	code := m.Run()
	if agent != nil {
		if err := agent.Stop(10 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		os.RemoveAll(agent.Dir)
	}
	return code
}

func holdLock(addr, prefix string) int {
	c := newCoord(nil, addr, prefix)
	l, err := c.Lock(context.Background(), "holder-process")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("locked", l.Fence())
	select {}
}

var (
	agentOnce sync.Once
	agent     *devagents.Agent
	agentErr  error
)

// consulAgent starts one real Consul dev agent for the package's tests; in
// the short tier it skips t instead.
func consulAgent(t *testing.T) string {
	t.Helper()
	tier.Starts(t, "a Consul agent")
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "consul-test-")
		if err != nil {
			agentErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		agent, agentErr = devagents.StartConsul(ctx, dir)
	})
	if agentErr != nil {
		t.Fatal(agentErr)
	}
	return agent.Addr
}

func newCoord(t *testing.T, addr, prefix string) *Coordinator {
	cfg := api.DefaultConfig()
	cfg.Address = strings.TrimPrefix(addr, "http://")
	cli, err := api.NewClient(cfg)
	if err != nil {
		if t != nil {
			t.Fatal(err)
		}
		panic(err)
	}
	c, err := New(Options{Client: cli, Prefix: prefix, SessionTTL: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	return c
}

// A holder whose session was invalidated (as when it paused past its TTL)
// still believes it holds the lock; its write must be refused by the fence.
func TestStaleHolderWriteIsFenced(t *testing.T) {
	c := newCoord(t, consulAgent(t), "fence")
	ctx := context.Background()
	a, err := c.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	stale := &lock{c: c, session: a.(*lock).session, lost: make(chan struct{}), done: make(chan struct{})}
	if _, err := c.o.Client.Session().Destroy(stale.session, nil); err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := c.Lock(bctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unlock(ctx)
	if b.Fence() <= a.Fence() {
		t.Fatalf("fence did not grow: %d then %d", a.Fence(), b.Fence())
	}
	if _, err := c.CreateRecord(ctx, stale, coord.Record{Token: "stale", Epoch: 1}); !errors.Is(err, coord.ErrLockLost) {
		t.Fatalf("stale holder's create: %v, want ErrLockLost", err)
	}
	if _, err := c.Record(ctx); !errors.Is(err, coord.ErrNoRecord) {
		t.Fatalf("stale write landed: %v", err)
	}
	if _, err := c.CreateRecord(ctx, b, coord.Record{Token: "b", Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	case <-time.After(15 * time.Second):
		t.Fatal("the invalidated holder was never told it lost the lock")
	}
}

// killHolder starts a lock holder process on prefix (holder name
// "holder-process"), waits until it holds the lock, kills it with SIGKILL
// and returns its lock's fence.
func killHolder(t *testing.T, addr, prefix string) uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+addr, holderEnv+"_PREFIX="+prefix)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	var fence uint64
	if _, serr := fmt.Sscanf(line, "locked %d", &fence); err != nil || serr != nil {
		t.Fatalf("holder: %q %v %v", line, err, serr)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return fence
}

// A holder process killed with SIGKILL: the other contender gets the lock
// once Consul invalidates the dead holder's session (TTL).
func TestKilledHolderLockPassesOn(t *testing.T) {
	addr := consulAgent(t)
	killHolder(t, addr, "killed")
	start := time.Now()
	c := newCoord(t, addr, "killed")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, "survivor")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	t.Logf("lock passed on %s after the holder was killed (session TTL 10s)", time.Since(start).Round(time.Millisecond))
}

// A member restarted after a kill -9 takes back the lock its dead process
// held under the same holder name at once, not after the session's TTL;
// the fence still grows.
func TestRestartedHolderTakesBackItsLock(t *testing.T) {
	addr := consulAgent(t)
	oldFence := killHolder(t, addr, "restarted")

	// Another holder still waits for the dead session to expire.
	other, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if l, err := newCoord(t, addr, "restarted").Lock(other, "someone-else"); err == nil {
		l.Unlock(context.Background())
		t.Fatal("another holder took the lock of a session that had not expired")
	}

	start := time.Now()
	ctx, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	l, err := newCoord(t, addr, "restarted").Lock(ctx, "holder-process")
	if err != nil {
		t.Fatalf("restarted holder did not take back its lock within 5s (session TTL 10s): %v", err)
	}
	defer l.Unlock(context.Background())
	took := time.Since(start)
	if l.Fence() <= oldFence {
		t.Fatalf("fence %d after takeover, not above the dead holder's %d", l.Fence(), oldFence)
	}
	t.Logf("restarted holder took back its lock in %s", took.Round(time.Millisecond))

	// Within one process a second Lock under the same name waits: it never
	// takes the lock from its own process's holder.
	same, cancel3 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel3()
	if l2, err := l.(*lock).c.Lock(same, "holder-process"); err == nil {
		l2.Unlock(context.Background())
		t.Fatal("a second Lock in the same process took the lock from the first")
	}
	select {
	case <-l.Lost():
		t.Fatal("the holder lost its lock to a second Lock of its own process")
	default:
	}
}
