package nomad_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/provider/nomad"
)

// startNomad starts a real `nomad agent -dev` for one test and stops it at
// the end. No Consul agent: the test jobs register no services, and a
// Nomad agent whose Consul does not answer still schedules and runs them.
func startNomad(t *testing.T) (*devagents.Agent, *api.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Nomad agent")
	}
	if _, err := devagents.Bin("nomad", devagents.NomadVersion); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ag, err := devagents.StartNomad(ctx, filepath.Join(t.TempDir(), "nomad"), "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ag.Stop(30 * time.Second); err != nil {
			t.Error(err)
		}
	})
	return ag, client(t, ag.Addr)
}

func client(t *testing.T, addr string) *api.Client {
	t.Helper()
	cfg := api.DefaultConfig()
	cfg.Address = addr
	cli, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// gatedJob is a batch job of one allocation in group "etcd" with the
// provider's three port labels. Its task runs until the file gate exists,
// then fails; it is neither restarted nor rescheduled, so after the
// failure the allocation list does not change again.
func gatedJob(id, gate string) *api.Job {
	job := api.NewBatchJob(id, id, "global", 50)
	job.Datacenters = []string{"dc1"}
	tg := api.NewTaskGroup("etcd", 1)
	tg.Networks = []*api.NetworkResource{{DynamicPorts: []api.Port{
		{Label: nomadglue.PortClient}, {Label: nomadglue.PortPeer}, {Label: nomadglue.PortStatus},
	}}}
	tg.RestartPolicy = &api.RestartPolicy{Attempts: ptr(0), Mode: ptr("fail")}
	tg.ReschedulePolicy = &api.ReschedulePolicy{Attempts: ptr(0), Unlimited: ptr(false)}
	task := api.NewTask("wait", "raw_exec")
	task.Config = map[string]any{
		"command": "/bin/sh",
		"args":    []string{"-c", fmt.Sprintf("while [ ! -e %q ]; do sleep 0.2; done; exit 1", gate)},
	}
	task.Resources = &api.Resources{CPU: ptr(20), MemoryMB: ptr(32)}
	tg.AddTask(task)
	job.AddTaskGroup(tg)
	return job
}

func ptr[T any](v T) *T { return &v }

// failOnce is an HTTP front to a real Nomad agent that passes everything
// through, except that the first read of job after an allocation list
// in which some allocation has failed gets a 500.
type failOnce struct {
	job   string
	proxy *httputil.ReverseProxy

	mu       sync.Mutex
	armed    bool
	injected int
}

func newFailOnce(t *testing.T, nomadAddr, job string) *failOnce {
	t.Helper()
	u, err := url.Parse(nomadAddr)
	if err != nil {
		t.Fatal(err)
	}
	f := &failOnce{job: job, proxy: httputil.NewSingleHostReverseProxy(u)}
	f.proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path != "/v1/allocations" || resp.StatusCode != http.StatusOK {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var stubs []struct{ ClientStatus string }
		if err := json.Unmarshal(body, &stubs); err != nil {
			return err
		}
		for _, s := range stubs {
			if s.ClientStatus == api.AllocClientStatusFailed {
				f.mu.Lock()
				if f.injected == 0 {
					f.armed = true
				}
				f.mu.Unlock()
			}
		}
		return nil
	}
	return f
}

func (f *failOnce) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Plain bodies, so that ModifyResponse can read the allocation list.
	r.Header.Del("Accept-Encoding")
	if r.URL.Path == "/v1/job/"+f.job {
		f.mu.Lock()
		fire := f.armed
		if fire {
			f.armed = false
			f.injected++
		}
		f.mu.Unlock()
		if fire {
			http.Error(w, "injected failure of the job read", http.StatusInternalServerError)
			return
		}
	}
	f.proxy.ServeHTTP(w, r)
}

func (f *failOnce) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// waitFor polls cond until it holds or timeout passes, then fails with the
// last state cond reported.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func describe(insts []provider.Instance, err error) string {
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d instances", len(insts))
	for _, in := range insts {
		fmt.Fprintf(&b, " %+v", in)
	}
	return b.String()
}

// The watch's allocation index moves only after a job read succeeds: it
// advanced before the job read succeeded, so the allocation change that
// came with a failed job read was dropped until the next change (up to the 5-minute blocking query). Here
// the only allocation fails and nothing changes after it, and the first
// job read after the failure is failed on purpose (the job has its own
// watch now, which may not read it again at all): the provider must stop
// listing the allocation soon after it failed.
func TestWatchFailedJobReadDoesNotDropUpdate(t *testing.T) {
	ag, direct := startNomad(t)
	const jobID = "watch-drop"
	gate := filepath.Join(t.TempDir(), "fail-now")
	if _, _, err := direct.Jobs().Register(gatedJob(jobID, gate), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopJob(t, direct, jobID, gate) })

	front := newFailOnce(t, ag.Addr, jobID)
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)
	p := nomad.New(nomad.Options{Client: client(t, srv.URL), Job: jobID, Group: "etcd"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watched := make(chan struct{})
	go func() { defer close(watched); p.Watch(ctx) }()
	t.Cleanup(func() { cancel(); <-watched })

	waitFor(t, time.Minute, "the allocation running and listed", func() (bool, string) {
		allocs, _, err := direct.Jobs().Allocations(jobID, false, nil)
		if err != nil || len(allocs) != 1 || allocs[0].ClientStatus != api.AllocClientStatusRunning {
			return false, fmt.Sprintf("nomad: %d allocations (%v)", len(allocs), err)
		}
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		defer wcancel()
		insts, err := p.Instances(wctx)
		return err == nil && len(insts) == 1 && insts[0].PeerPort != 0, describe(insts, err)
	})

	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Without the fix the list stays stale for the rest of the blocking
	// query (5 minutes); with it, the next query returns at once.
	waitFor(t, 20*time.Second, "the failed allocation to leave the list", func() (bool, string) {
		insts, err := p.Instances(ctx)
		return err == nil && len(insts) == 0, describe(insts, err)
	})
	t.Logf("job reads failed on purpose meanwhile: %d", front.Injected())
}

// stopJob lets the task end, deregisters the job and waits until Nomad
// reports every allocation terminal, so that no task process outlives the
// agent.
func stopJob(t *testing.T, cli *api.Client, jobID, gate string) {
	t.Helper()
	_ = os.WriteFile(gate, nil, 0o600)
	if _, _, err := cli.Jobs().Deregister(jobID, false, nil); err != nil {
		t.Errorf("deregister %s: %v", jobID, err)
		return
	}
	deadline := time.Now().Add(time.Minute)
	for {
		allocs, _, err := cli.Jobs().Allocations(jobID, true, nil)
		live := 0
		for _, a := range allocs {
			if a.ClientStatus == api.AllocClientStatusPending || a.ClientStatus == api.AllocClientStatusRunning {
				live++
			}
		}
		if err == nil && live == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("allocations of %s not terminal after a minute: %d live (%v)", jobID, live, err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
