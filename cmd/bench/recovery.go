package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	eps := func(ps []localmode.MemberPorts) []string {
		var out []string
		for _, p := range ps {
			out = append(out, fmt.Sprintf("http://127.0.0.1:%d", p.Client))
		}
		return out
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps(ports), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, err
	}
	defer cli.Close()
	if err := waitReady(ctx, []*clientv3.Client{cli}, eps(ports), 3, 2*time.Minute); err != nil {
		return nil, nil, fmt.Errorf("recovery cluster: %w", err)
	}
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
		return nil, nil, err
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
		return nil, nil, err
	}
	lost := time.Now()
	for _, n := range []string{"m1", "m2"} {
		if err := sup.Stop(n, 20*time.Second); err != nil {
			return nil, nil, err
		}
	}
	// The lost slots come back as new, empty members on new ports, as
	// replacements on other hosts would.
	fresh, err := localmode.AllocatePorts(2)
	if err != nil {
		return nil, nil, err
	}
	ports = []localmode.MemberPorts{ports[0], fresh[0], fresh[1]}
	if err := lay.WriteConfig(opts, ports); err != nil {
		return nil, nil, err
	}
	for _, n := range []string{"m1", "m2"} {
		if err := os.Rename(filepath.Join(lay.DataDir(), n), filepath.Join(e.opts.work, "recovery-lost-"+n)); err != nil {
			return nil, nil, err
		}
		if err := sup.Start(n); err != nil {
			return nil, nil, err
		}
	}
	cli2, err := clientv3.New(clientv3.Config{Endpoints: eps(ports), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, err
	}
	defer cli2.Close()
	if err := poll(ctx, 2*time.Minute, "an acknowledged put after the quorum loss", func() (bool, string) {
		err := put(cli2, "after")
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return nil, nil, err
	}
	res.Value = time.Since(lost).Seconds()
	e.log.Info("quorum loss -> writable", "took", time.Since(lost).Round(10*time.Millisecond))
	// The put must come from a recovered cluster, not from members that left
	// one by one and left the survivor with a quorum of its own.
	if after, source, err := record(); err != nil || after != epoch+1 || source != "data" {
		return nil, nil, fmt.Errorf("after the loss the record is at epoch %d from %q (%v), want epoch %d from the survivor's data", after, source, err, epoch+1)
	}
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if g, err := cli2.Get(gctx, "before"); err != nil || len(g.Kvs) != 1 {
		return nil, nil, fmt.Errorf("the key acknowledged before the loss is gone after recovery (%v)", err)
	}
	note := fmt.Sprintf("Quorum loss (d): a local 3-member etcd-nomad cluster (member processes, TLS off, recovery_grace %s, stale_after 2s); m1 and m2 are stopped (SIGTERM) and come back as new empty members on new ports; "+
		"the time runs from the first stop until a put through the new endpoints is acknowledged (1 s per attempt); the cluster record must then be at the next epoch, seeded from the survivor's data, and the key written before the loss is read back. It includes the %s grace etcd-nomad waits on purpose before recovering.",
		recoveryGrace, recoveryGrace)
	return []bench.Result{res}, []string{note}, nil
}
