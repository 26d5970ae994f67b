package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
)

// checkOperatorAccess runs the eval line `up` printed, in a POSIX shell,
// and lists the members with the credentials it exported (clientv3, and
// the pinned etcdctl when built). It also resolves the cluster's Consul
// SRV name on the agent's DNS server. Errors, not fatal: down must run.
func checkOperatorAccess(t *testing.T, dir, bin string) {
	t.Helper()
	b, err := os.ReadFile(statePath(dir))
	if err != nil {
		t.Errorf("state: %v", err)
		return
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		t.Errorf("state: %v", err)
		return
	}
	line := evalLine(st, bin, filepath.Join(dir, "cluster.hcl"))
	// The operator's certificate goes to a directory of the test's.
	sh := exec.Command("sh", "-c", line+` && printf '%s\n' "$ETCDCTL_ENDPOINTS" "$ETCDCTL_CACERT" "$ETCDCTL_CERT" "$ETCDCTL_KEY"`)
	sh.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir(), "CONSUL_HTTP_ADDR=", "NOMAD_ADDR=")
	var stderr strings.Builder
	sh.Stderr = &stderr
	out, err := sh.Output()
	if err != nil {
		t.Errorf("%s: %v\n%s", line, err, stderr.String())
		return
	}
	t.Logf("%s\n%s", line, stderr.String())
	v := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(v) != 4 {
		t.Errorf("the eval line set %q", v)
		return
	}
	tlsCfg, err := certs.ClientConfig(certs.Files{CA: v[1], Cert: v[2], Key: v[3]})
	if err != nil {
		t.Errorf("credentials: %v", err)
		return
	}
	eps := strings.Split(v[0], ",")
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: tlsCfg, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Errorf("client: %v", err)
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ml, err := cli.MemberList(ctx)
	if err != nil || len(ml.Members) != 3 {
		t.Errorf("member list with the eval line's credentials: %v (%v)", err, ml)
	}
	if _, err := cli.Put(ctx, "hello", "world"); err != nil {
		t.Errorf("put with the eval line's credentials: %v", err)
	}
	checkConsumerSurvivesARestart(t, dir, cli)
	if etcdctl, err := devagents.Bin("etcdctl", devagents.EtcdctlVersion); err == nil {
		c := exec.Command("sh", "-c", line+` && "$ETCDCTL" member list && "$ETCDCTL" get hello --print-value-only`)
		c.Env = append(sh.Env, "ETCDCTL="+etcdctl)
		out, err := c.Output()
		if err != nil || strings.Count(string(out), ", started, ") != 3 || !strings.HasSuffix(strings.TrimSpace(string(out)), "world") {
			t.Errorf("etcdctl after the eval line: %v\n%s", err, out)
		}
	} else {
		t.Logf("real etcdctl not run: %v", err)
	}
	// Consul's RFC 2782 name for the service: one SRV record per member,
	// on the client ports the eval line named. A deadline of its own: the
	// member list's has gone to the consumer's restart check.
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, st.ConsulDNS)
	}}
	// Polled: Consul answers with passing instances only, and a member
	// restarted a moment ago (the consumer's restart check) may not pass
	// its check again yet (one CI run saw 2 of 3 ports).
	var want []string
	for _, ep := range eps {
		want = append(want, ep[strings.LastIndex(ep, ":")+1:])
	}
	sort.Strings(want)
	var ports []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		var srvs []*net.SRV
		_, srvs, err = r.LookupSRV(dctx, "demo", "tcp", "service.consul")
		dcancel()
		ports = ports[:0]
		for _, s := range srvs {
			ports = append(ports, strconv.Itoa(int(s.Port)))
		}
		sort.Strings(ports)
		if err == nil && strings.Join(ports, ",") == strings.Join(want, ",") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Errorf("SRV _demo._tcp.service.consul: %v", err)
		return
	}
	if strings.Join(ports, ",") != strings.Join(want, ",") {
		t.Errorf("SRV _demo._tcp.service.consul ports %v, want the endpoints' %v", ports, want)
	}
}
