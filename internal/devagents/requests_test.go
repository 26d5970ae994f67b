package devagents

import (
	"os"
	"path/filepath"
	"testing"
)

// RequestsSince reads the requests an agent logged after a mark: Consul's
// and Nomad's line formats, a quoted URL, and a query with an index as a
// blocking query.
func TestRequestsSince(t *testing.T) {
	dir := t.TempDir()
	a := &Agent{Name: "consul", Dir: dir}
	log := filepath.Join(dir, "consul.log")
	if err := os.WriteFile(log, []byte("2026-01-01T00:00:00Z [DEBUG] agent.http: Request finished: method=GET url=/v1/kv/old from=127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mark, err := a.LogSize()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`2026-01-01T00:00:01Z [DEBUG] agent.http: Request finished: method=PUT url=/v1/kv/etcd-nomad/x/summary from=127.0.0.1:2
2026-01-01T00:00:02Z [DEBUG] agent.http: Request finished: method=GET url="/v1/kv/etcd-nomad/x/?recurse=&index=42" from=127.0.0.1:3
2026-01-01T00:00:03Z [DEBUG] http: request complete: method=GET path=/v1/agent/health?index=0 duration=1ms
2026-01-01T00:00:04Z [INFO] something else
`)
	f.Close()
	got, err := a.RequestsSince(mark)
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{Agent: "consul", Method: "PUT", Path: "/v1/kv/etcd-nomad/x/summary"},
		{Agent: "consul", Method: "GET", Path: "/v1/kv/etcd-nomad/x/", Blocking: true},
		{Agent: "consul", Method: "GET", Path: "/v1/agent/health"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
