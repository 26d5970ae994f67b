package task

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/internal/clustertest"
	"github.com/etcd-nomad/etcd-nomad/task/trust"
)

// Data review (session 11; the check predates the empty member's probe, which extends it to
// empty members and their seeds and restores): etcd's Status lists every
// alarm in Errors, so answersWithLeader's len(st.Errors) == 0 does not
// count a serving quorum with NOSPACE raised. Such a cluster has a leader,
// serves reads and deletes (acknowledged writes), and serves puts again
// once its leader disarms the alarm: a recovery or an empty member's
// restore beside it makes a second cluster.
func TestANospaceMajorityCountsAsServing(t *testing.T) {
	dir := t.TempDir()
	ports := clustertest.FreePorts(t, 2)
	u := func(p int) url.URL { x, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", p)); return *x }
	pa, ca := u(ports[0]), u(ports[1])
	e, _ := startPlainEtcd(t, filepath.Join(dir, "a"), "a", pa, ca, "a="+pa.String(), embed.ClusterStateFlagNew)
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ca.String()}, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	id := uint64(e.Server.Cluster().ID())
	m := &Member{trust: &trust.Trust{}} // TLS off
	if _, ok := m.answersWithLeader(ctx, []string{ca.String()}, id); !ok {
		t.Fatal("not counted before the alarm")
	}
	if _, err := e.Server.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: uint64(e.Server.MemberID()), Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, "k"); err != nil {
		t.Fatalf("delete under NOSPACE: %v", err)
	}
	if _, ok := m.answersWithLeader(ctx, []string{ca.String()}, id); !ok {
		t.Fatalf("a cluster with a leader that just acknowledged a delete under NOSPACE is not counted as serving: a recovery beside it proceeds")
	}
}
