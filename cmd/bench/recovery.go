package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/bench"
	"github.com/etcd-nomad/etcd-nomad/localmode"
)

// recoveryGrace is the recovery_grace of the quorum-loss figure: the
// time etcd-nomad waits, by design, before it acts.
const recoveryGrace = 5 * time.Second

// recoveryFigure measures (d): 2 of 3 members of a local cluster lost for
// good and replaced by empty ones; the time from the loss until a put is
// acknowledged again (the survivor seeds the next epoch from its data).
func (e *runEnv) recoveryFigure(ctx context.Context) ([]bench.Result, []string, error) {
	res := bench.Result{ID: "d.quorum-loss", Name: "quorum loss (2 of 3 lost) -> writable again", Unit: "s", GoalKind: bench.AtMost, Goal: 20}
	bin, err := e.etcdNomad(ctx)
	if err != nil {
		return nil, nil, err
	}
	ports, err := localmode.AllocatePorts(3)
	if err != nil {
		return nil, nil, err
	}
	lay := localmode.Layout{Dir: filepath.Join(e.opts.work, "recovery")}
	opts := localmode.Options{Name: "bench-recovery", TLSMode: config.TLSOff, StaleAfter: 2 * time.Second, RecoveryGrace: recoveryGrace}
	if err := lay.WriteConfig(opts, ports); err != nil {
		return nil, nil, err
	}
	sup := &localmode.Supervisor{Bin: bin, Layout: lay, Restart: true, Log: e.log.Named("supervisor")}
	defer func() {
		if err := sup.StopAll(20 * time.Second); err != nil {
			e.log.Warn("stop recovery members", "error", err)
		}
	}()
	for i := range ports {
		if err := sup.Start(localmode.MemberName(i)); err != nil {
			return nil, nil, err
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: clientURLs(ports), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, err
	}
	defer cli.Close()
	if err := waitReady(ctx, []*clientv3.Client{cli}, clientURLs(ports), 3, 2*time.Minute); err != nil {
		return nil, nil, fmt.Errorf("recovery cluster: %w", err)
	}
	took, _, err := e.loseQuorum(ctx, sup, lay, opts, ports, []int{1, 2}, cli, "recovery")
	if err != nil {
		return nil, nil, err
	}
	res.Value = took.Seconds()
	e.log.Info("quorum loss -> writable", "took", took.Round(10*time.Millisecond))
	note := fmt.Sprintf("Quorum loss (d): a local 3-member etcd-nomad cluster (member processes, TLS off, recovery_grace %s, stale_after 2s); m1 and m2 are stopped (SIGTERM) and come back as new empty members on new ports; "+
		"the time runs from the first stop until a put through the new endpoints is acknowledged (1 s per attempt); the cluster record must then be at the next epoch, seeded from the survivor's data, and the key written before the loss is read back. It includes the %s grace etcd-nomad waits on purpose before recovering.",
		recoveryGrace, recoveryGrace)
	return []bench.Result{res}, []string{note}, nil
}

// clientURLs are the members' client URLs (TLS off).
func clientURLs(ps []localmode.MemberPorts) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("http://127.0.0.1:%d", p.Client))
	}
	return out
}

// loseQuorum loses the members lost (indexes into ports) of a running
// local etcd-nomad cluster for good: they stop and come back as new,
// empty members on new ports, as replacements on other hosts would. It
// returns the time from the first stop until a put through the new
// endpoints is acknowledged (1 s per attempt), and the ports now in use.
// The put must come from a recovered cluster: the record at the next
// epoch, seeded from a survivor's data, and a key acknowledged before the
// loss read back. cli reaches the cluster before the loss; tag names the
// lost data dirs set aside under the scratch directory.
func (e *runEnv) loseQuorum(ctx context.Context, sup *localmode.Supervisor, lay localmode.Layout, opts localmode.Options, ports []localmode.MemberPorts, lost []int, cli *clientv3.Client, tag string) (time.Duration, []localmode.MemberPorts, error) {
	put := func(c *clientv3.Client, key string) error {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := c.Put(pctx, key, "v")
		return err
	}
	if err := poll(ctx, time.Minute, "a first acknowledged put", func() (bool, string) {
		err := put(cli, "before")
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return 0, nil, err
	}
	record := func() (uint64, string, error) {
		cl, _, diags := config.LoadFile(lay.Config())
		if diags.HasErrors() {
			return 0, "", fmt.Errorf("recovery definition: %s", diags.Error())
		}
		co, err := backends.Coordinator(cl)
		if err != nil {
			return 0, "", err
		}
		r, err := co.Record(ctx)
		return r.Epoch, string(r.Source), err
	}
	epoch, _, err := record()
	if err != nil {
		return 0, nil, err
	}
	start := time.Now()
	for _, i := range lost {
		if err := sup.Stop(localmode.MemberName(i), 20*time.Second); err != nil {
			return 0, nil, err
		}
	}
	fresh, err := localmode.AllocatePorts(len(lost))
	if err != nil {
		return 0, nil, err
	}
	ports = slices.Clone(ports)
	for j, i := range lost {
		ports[i] = fresh[j]
	}
	if err := lay.WriteConfig(opts, ports); err != nil {
		return 0, nil, err
	}
	for _, i := range lost {
		n := localmode.MemberName(i)
		if err := os.Rename(filepath.Join(lay.DataDir(), n), filepath.Join(e.opts.work, tag+"-lost-"+n)); err != nil {
			return 0, nil, err
		}
		if err := sup.Start(n); err != nil {
			return 0, nil, err
		}
	}
	cli2, err := clientv3.New(clientv3.Config{Endpoints: clientURLs(ports), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, nil, err
	}
	defer cli2.Close()
	if err := poll(ctx, 3*time.Minute, "an acknowledged put after the quorum loss", func() (bool, string) {
		err := put(cli2, "after")
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return 0, nil, err
	}
	took := time.Since(start)
	if after, source, err := record(); err != nil || after != epoch+1 || source != "data" {
		return 0, nil, fmt.Errorf("after the loss the record is at epoch %d from %q (%v), want epoch %d from a survivor's data", after, source, err, epoch+1)
	}
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if g, err := cli2.Get(gctx, "before"); err != nil || len(g.Kvs) != 1 {
		return 0, nil, fmt.Errorf("the key acknowledged before the loss is gone after recovery (%v)", err)
	}
	return took, ports, nil
}
