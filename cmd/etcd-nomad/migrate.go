package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/coreos/go-semver/semver"
	"github.com/hashicorp/cli"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/certs"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord"
)

type migrateCommand struct{ ui cli.Ui }

func (c *migrateCommand) Synopsis() string {
	return "Migrate a running etcd cluster in: etcd-nomad members join it, its own members leave"
}

func (c *migrateCommand) Help() string {
	return strings.TrimSpace(`
Usage: etcd-nomad migrate -config FILE -endpoints URL[,URL...] [-cacert F -cert F -key F] [-timeout D]

  Brings a running etcd cluster outside etcd-nomad (3.5.26 or later, or
  3.6) under etcd-nomad with all its data, its cluster id and no downtime:

    1. checks the outside cluster (every member answers, versions) and
       records its cluster id and client URLs in the coordinator, as the
       cluster this definition's members belong to (refused when a record
       exists already, unless it is this same migration: then it resumes);
    2. the members (start them now: 'nomad job run', or 'etcd-nomad
       member') ask the outside members for the member list and join
       through them as learners, one at a time, and are promoted once
       caught up;
    3. the outside members, which no instance of the provider lists, are
       then removed one at a time, after stale_after, by the etcd-nomad
       voters (never below a quorum of healthy voters, the leader last);
    4. once none is left and the definition's size of etcd-nomad voters
       runs, the outside client URLs are cleared from the record.

  This command records the migration and follows it to the end (or until
  -timeout), printing every membership change. Stop the outside etcd
  processes afterwards: each one removed shuts itself down.

  The outside members and the etcd-nomad members reach each other as
  peers: with tls { mode = "off" } the outside cluster must be plain
  http; with TLS, use tls { mode = "files" } with certificates its CA
  issued (members of tls { mode = "auto" } trust only their own CA).

Options:
  -config FILE        cluster definition
  -endpoints URLS     client URLs of the outside cluster, comma-separated
  -cacert, -cert, -key
                      client TLS for the outside cluster (https endpoints)
  -timeout D          how long to follow the migration (default 30m)`)
}

func (c *migrateCommand) Run(args []string) int {
	fs := newClusterFlags("migrate")
	eps := fs.String("endpoints", "", "")
	cacert := fs.String("cacert", "", "")
	cert := fs.String("cert", "", "")
	key := fs.String("key", "", "")
	timeout := fs.Duration("timeout", 30*time.Minute, "")
	cl := fs.load(c.ui, c.Help(), args, false, eps)
	if cl == nil {
		return 1
	}
	ctx, cancel := signalContext()
	defer cancel()
	var tlsCfg *tls.Config
	if *cacert != "" || *cert != "" {
		var err error
		if tlsCfg, err = certs.ClientConfig(certs.Files{CA: *cacert, Cert: *cert, Key: *key}); err != nil {
			c.ui.Error("migrate: client TLS: " + err.Error())
			return 1
		}
	}
	endpoints := strings.Split(*eps, ",")
	start := time.Now()
	m, err := startMigration(ctx, cl, endpoints, tlsCfg, c.ui)
	if err != nil {
		c.ui.Error("migrate: " + err.Error())
		return 1
	}
	fctx, fcancel := context.WithTimeout(ctx, *timeout)
	defer fcancel()
	if err := m.follow(fctx, c.ui); err != nil {
		c.ui.Error("migrate: " + err.Error() + " (run the command again to keep following it)")
		return 1
	}
	c.ui.Output(fmt.Sprintf("migrated: cluster %x runs on %d etcd-nomad voters, every outside member removed, in %s", m.clusterID, cl.Size, time.Since(start).Round(time.Second)))
	return 0
}

// migration is a migration in progress: the outside cluster, its members
// as first seen, and how to reach the cluster.
type migration struct {
	cl        *config.Cluster
	co        coord.Coordinator
	cli       *clientv3.Client
	clusterID uint64
	outside   map[uint64]string // outside member id -> name
}

// minOutsideVersion: etcd 3.6 joins a 3.5 cluster from 3.5.26 on.
var minOutsideVersion = semver.Version{Major: 3, Minor: 5, Patch: 26}

// startMigration checks the outside cluster and records it.
func startMigration(ctx context.Context, cl *config.Cluster, endpoints []string, tlsCfg *tls.Config, ui cli.Ui) (*migration, error) {
	for _, ep := range endpoints {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("-endpoints: %q is not an http(s) client URL", ep)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("outside cluster: %w", err)
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(lctx)
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("outside cluster %v: member list: %w", endpoints, err)
	}
	m := &migration{cl: cl, cli: cli, clusterID: resp.Header.ClusterId, outside: map[uint64]string{}}
	wantScheme := "https"
	if cl.TLS.Mode == config.TLSOff {
		wantScheme = "http"
	}
	for _, mem := range resp.Members {
		if mem.IsLearner || len(mem.ClientURLs) == 0 {
			cli.Close()
			return nil, fmt.Errorf("outside member %s (%x) is a learner or has not started: finish that membership change first", mem.Name, mem.ID)
		}
		for _, p := range mem.PeerURLs {
			if u, err := url.Parse(p); err == nil && u.Scheme != wantScheme {
				cli.Close()
				return nil, fmt.Errorf("outside member %s's peer URL %s is %s, but %s's members speak %s to their peers (tls mode %q): see 'etcd-nomad migrate -h'", mem.Name, p, u.Scheme, cl.File, wantScheme, cl.TLS.Mode)
			}
		}
		st, err := cli.Status(lctx, mem.ClientURLs[0])
		if err != nil {
			cli.Close()
			return nil, fmt.Errorf("outside member %s (%s) does not answer: every member must, before members are added: %w", mem.Name, mem.ClientURLs[0], err)
		}
		v, err := semver.NewVersion(st.Version)
		if err != nil || v.LessThan(minOutsideVersion) || v.Major != 3 || v.Minor > 6 {
			cli.Close()
			return nil, fmt.Errorf("outside member %s runs etcd %s: migrating in needs 3.5.26 or later 3.5, or 3.6 (upgrade the outside cluster first, one minor version at a time)", mem.Name, st.Version)
		}
		m.outside[mem.ID] = mem.Name
		ui.Output(fmt.Sprintf("outside member %s (%x) etcd %s, revision %d, %s", mem.Name, mem.ID, st.Version, st.Header.Revision, mem.ClientURLs[0]))
	}
	co, err := backends.Coordinator(cl)
	if err != nil {
		cli.Close()
		return nil, err
	}
	m.co = co
	if err := m.record(ctx, endpoints, ui); err != nil {
		cli.Close()
		return nil, err
	}
	return m, nil
}

// record writes the cluster record of the migration under the lock, or
// finds it written by an earlier run.
func (m *migration) record(ctx context.Context, endpoints []string, ui cli.Ui) error {
	return m.underLock(ctx, func(l coord.Lock, cur coord.Record, err error) error {
		switch {
		case err == nil && cur.ClusterID == m.clusterID && len(cur.Join) > 0:
			ui.Output(fmt.Sprintf("resuming the migration of cluster %x recorded before (epoch %d)", m.clusterID, cur.Epoch))
			return nil
		case err == nil:
			return fmt.Errorf("the coordinator holds a record of cluster %x (epoch %d, seeded by %s): %s's members run a cluster already; not migrating another one in", cur.ClusterID, cur.Epoch, cur.Seeder, m.cl.Name)
		case !errors.Is(err, coord.ErrNoRecord):
			return err
		}
		rec := coord.Record{ClusterID: m.clusterID, Token: coord.NewToken(), Epoch: 1, Seeder: "migrate", Join: endpoints}
		if _, err := m.co.CreateRecord(ctx, l, rec); err != nil {
			return fmt.Errorf("record the migration: %w", err)
		}
		ui.Output(fmt.Sprintf("recorded cluster %x (epoch 1) with its %d outside members: start %s's members now; they join as learners one at a time", m.clusterID, len(m.outside), m.cl.Name))
		return nil
	})
}

// underLock takes the cluster lock, reads the record (err: ErrNoRecord
// when there is none) and runs f; the lock is released after it.
func (m *migration) underLock(ctx context.Context, f func(l coord.Lock, cur coord.Record, err error) error) error {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l, err := m.co.Lock(lctx, "etcd-nomad-migrate")
	if err != nil {
		return fmt.Errorf("take the cluster lock: %w", err)
	}
	defer l.Unlock(context.Background())
	cur, err := m.co.Record(ctx)
	return f(l, cur, err)
}

// follow prints the membership as it changes until no outside member is
// left and the definition's size of etcd-nomad voters runs, then clears
// the outside client URLs from the record.
func (m *migration) follow(ctx context.Context, ui cli.Ui) error {
	defer m.cli.Close()
	last := ""
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := m.cli.MemberList(lctx)
		cancel()
		if err == nil && resp.Header.ClusterId == m.clusterID {
			var outside, voters, learners []string
			var urls []string
			for _, mem := range resp.Members {
				name := mem.Name
				if name == "" {
					name = fmt.Sprintf("%x (not started)", mem.ID)
				}
				switch {
				case m.outside[mem.ID] != "":
					outside = append(outside, name)
				case mem.IsLearner:
					learners = append(learners, name)
				default:
					voters = append(voters, name)
				}
				urls = append(urls, mem.ClientURLs...)
			}
			sort.Strings(outside)
			sort.Strings(voters)
			sort.Strings(learners)
			now := fmt.Sprintf("outside members %v, etcd-nomad voters %v, learners %v", outside, voters, learners)
			if now != last {
				ui.Output(now)
				last = now
			}
			if len(urls) > 0 && !slices.Equal(urls, m.cli.Endpoints()) {
				// Keep reaching the cluster as its outside members leave.
				m.cli.SetEndpoints(urls...)
			}
			if len(outside) == 0 && len(learners) == 0 && len(voters) >= m.cl.Size {
				return m.finish(ctx)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("migration not finished (%s): %w", last, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// finish clears the outside client URLs from the record, under the lock.
func (m *migration) finish(ctx context.Context) error {
	return m.underLock(ctx, func(l coord.Lock, cur coord.Record, err error) error {
		if err != nil {
			return fmt.Errorf("read the record: %w", err)
		}
		if len(cur.Join) == 0 {
			return nil
		}
		cur.Join = nil
		if _, err := m.co.UpdateRecord(ctx, l, cur); err != nil {
			return fmt.Errorf("clear the outside endpoints from the record: %w", err)
		}
		return nil
	})
}
