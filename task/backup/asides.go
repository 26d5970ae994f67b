package backup

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcd-nomad/etcd-nomad/status"
)

// asideCache is what /status reports of the data this member set aside
// (aside/: renamed, never deleted on the spot, invariant 7): a recovery
// that loses revisions may find them in a copy there, and no command
// named them before (sim seed 121: m0's aside/ held 541..546 while the
// operator was told only the chain's shortfall). Each copy's backend is
// opened to read its revision, so the list is read again only when the
// aside directory changed (its modification time: a set-aside, a carried
// sibling or pruning renames or removes an entry in it).
type asideCache struct {
	mu     sync.Mutex
	read   bool
	mod    time.Time
	copies []status.AsideCopy
	more   int
	// warned names the asides whose backend did not read, logged once.
	warned map[string]bool
}

// list returns dir's asides, newest first, at most status.MaxAsides, and
// how many more there are.
func (c *asideCache) list(dir string, log hclog.Logger) ([]status.AsideCopy, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fi, err := os.Stat(dir)
	if err != nil {
		c.read, c.copies, c.more = false, nil, 0
		return nil, 0
	}
	if c.read && fi.ModTime().Equal(c.mod) {
		return c.copies, c.more
	}
	asides, err := readAsides(dir)
	if err != nil {
		return c.copies, c.more // the last list read
	}
	c.warnUnreadableLocked(log, asides)
	sort.Slice(asides, func(i, j int) bool { return asides[i].Name > asides[j].Name })
	var copies []status.AsideCopy
	for _, a := range asides[:min(len(asides), status.MaxAsides)] {
		ac := status.AsideCopy{Name: a.Name, Path: filepath.Join(dir, a.Name), Revision: a.Revision, At: asideTime(a.Name)}
		if a.MetaOK {
			ac.Cluster, ac.Token, ac.Epoch, ac.ClusterID = a.Meta.Cluster, a.Meta.Token, a.Meta.Epoch, a.Meta.ClusterID
		}
		copies = append(copies, ac)
	}
	c.read, c.mod, c.copies, c.more = true, fi.ModTime(), copies, len(asides)-len(copies)
	return c.copies, c.more
}

// warnUnreadable logs, once per aside, a set-aside copy whose backend
// did not read (its revision is reported unknown, 0).
func (c *asideCache) warnUnreadable(log hclog.Logger, asides []aside) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.warnUnreadableLocked(log, asides)
}

func (c *asideCache) warnUnreadableLocked(log hclog.Logger, asides []aside) {
	for _, a := range asides {
		if a.RevisionErr == nil || c.warned[a.Name] {
			continue
		}
		if c.warned == nil {
			c.warned = map[string]bool{}
		}
		c.warned[a.Name] = true
		log.Warn("set-aside data's backend does not read: its revision is unknown", "aside", a.Name, "error", a.RevisionErr)
	}
}

// asideTime is when the aside named name was set aside (its name begins
// with the time: datadir.SetAside), RFC 3339; "" when it does not say.
func asideTime(name string) string {
	stamp, _, _ := strings.Cut(name, "-")
	t, err := time.Parse("20060102T150405.000000000Z", stamp)
	if err != nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
