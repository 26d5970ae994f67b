package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/internal/tier"
)

// memberEnv reads one variable of a running member's environment.
func memberEnv(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatalf("environment of member pid %d: %v", pid, err)
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// The job review's item 4: the members' NOMAD_ADDR and CONSUL_HTTP_ADDR
// were baked in from the renderer's shell, which names the operator's view
// of Nomad and Consul, not the clients'. Rendered where both point nowhere,
// the job must still run: the members reach Nomad through their client's
// task API socket and Consul at the definition's address.
func TestMembersUseTheirClientsAddressesNotTheRenderers(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	t.Parallel() // disturbs only its own job: see harness_test.go
	c := newCluster(t, "e2e-addrs", 1)
	cmd := exec.Command(binary, "job", "render", "-binary", binary, c.file)
	cmd.Env = append(os.Environ(), "NOMAD_ADDR=http://127.0.0.1:1", "CONSUL_HTTP_ADDR=127.0.0.1:1")
	spec, err := cmd.Output()
	if err != nil {
		t.Fatalf("job render: %v", err)
	}
	path := filepath.Join(c.dir, "etcd.nomad.hcl")
	if err := os.WriteFile(path, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	c.submit(path)
	c.waitPassing(1, 2*time.Minute)
	st, err := c.status()
	if err != nil || len(st.Members) != 1 || st.Members[0].PID == 0 {
		t.Fatalf("status: %+v %v", st, err)
	}
	pid := st.Members[0].PID
	if got := memberEnv(t, pid, "NOMAD_ADDR"); !strings.HasPrefix(got, "unix://") || !strings.HasSuffix(got, "/secrets/api.sock") {
		t.Errorf("member NOMAD_ADDR = %q, want the task API socket unix://.../secrets/api.sock", got)
	}
	if got, want := memberEnv(t, pid, "CONSUL_HTTP_ADDR"), strings.TrimPrefix(consul.Addr, "http://"); got != want {
		t.Errorf("member CONSUL_HTTP_ADDR = %q, want the definition's %q", got, want)
	}
}

// The job review's item 6: with restart { mode = "delay" } a member that
// keeps crashing was restarted in place for ever, and reschedule never
// applied. With mode "fail", the 4th crash within the interval fails the
// allocation and Nomad places a replacement, which takes the sticky disk
// over: the member comes back with its data.
func TestCrashLoopingMemberIsRescheduled(t *testing.T) {
	tier.Starts(t, "Consul and Nomad agents")
	t.Parallel() // disturbs only its own job: see harness_test.go
	c := newCluster(t, "e2e-crashloop", 1)
	c.nomadRun("")
	c.waitPassing(1, 2*time.Minute)
	putN(t, c, "crashloop", 10)
	allocs := c.allocs()
	if len(allocs) != 1 {
		t.Fatalf("%d allocations, want 1", len(allocs))
	}
	first := allocs[0].ID
	before, err := c.status()
	if err != nil {
		t.Fatal(err)
	}
	// restart { attempts = 3 }: the 4th exit within 5m fails it.
	pid := 0
	for kill := 1; kill <= 4; kill++ {
		waitFor(t, time.Minute, fmt.Sprintf("a member process to kill (kill %d)", kill), func() (bool, string) {
			st, err := c.status()
			if err != nil {
				return false, err.Error()
			}
			if len(st.Members) != 1 || st.Members[0].PID == 0 || st.Members[0].PID == pid {
				return false, fmt.Sprintf("%+v", st.Members)
			}
			pid = st.Members[0].PID
			return true, ""
		})
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	cli := nomadClient(t)
	waitFor(t, time.Minute, "Nomad to fail the crash-looping allocation", func() (bool, string) {
		a, _, err := cli.Allocations().Info(first, nil)
		if err != nil {
			return false, err.Error()
		}
		return a.ClientStatus == nomadapi.AllocClientStatusFailed, fmt.Sprintf("client status %s, desired %s", a.ClientStatus, a.DesiredStatus)
	})
	waitFor(t, 2*time.Minute, "a replacement allocation", func() (bool, string) {
		allocs := c.allocs()
		for _, a := range allocs {
			if a.ID != first && a.ClientStatus == nomadapi.AllocClientStatusRunning {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d allocations wanted running", len(allocs))
	})
	c.waitPassing(1, 2*time.Minute)
	after, err := c.status()
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Members) != 1 || after.Members[0].ClusterID != before.Members[0].ClusterID {
		t.Fatalf("after the reschedule: %+v, want cluster %x", after.Members, before.Members[0].ClusterID)
	}
	if n := countPrefix(t, c, "crashloop"); n != 10 {
		t.Fatalf("%d keys after the reschedule, want 10", n)
	}
}
