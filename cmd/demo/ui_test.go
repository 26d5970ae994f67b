package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/status"
)

// checkConsulUI is the Consul UI health view (docs/consul-ui-service.png), in a real
// browser: the demo's service page (consulUI, the address up printed)
// lists the 3 members' instances with their checks passing; each
// instance's page shows its member check passing with the member's name,
// role, revision and DB size; the names are the cluster's members, one of
// them the leader, the others voters. Then one member process is killed (SIGKILL, its own
// PID): its instance turns critical, and passes again once Nomad has
// restarted the task.
func checkConsulUI(t *testing.T, b *browser, consulUI, dir string) {
	b.screenshotOnFailure(t)
	start := time.Now()
	b.open(t, consulUI)
	is := waitInstances(t, b, time.Minute, "3 instances with their service checks passing", allPassing(3))
	t.Logf("the service page listed 3 passing instances %.1fs after it was opened: %s", time.Since(start).Seconds(), describe(is))
	// docs/consul-ui-service.png: ETCD_NOMAD_UI_SCREENSHOT=$PWD/docs/consul-ui-service.png
	if p := os.Getenv("ETCD_NOMAD_UI_SCREENSHOT"); p != "" {
		if err := b.saveTop(p, 500); err != nil {
			t.Errorf("ETCD_NOMAD_UI_SCREENSHOT: %v", err)
		}
	}

	ms := checkOutputs(t, b, is)
	var names, roles []string
	for _, m := range ms {
		t.Logf("%s: member %s, %s, revision %s, db_size %s", m.instance, m.name, m.role, m.revision, m.dbSize)
		names = append(names, m.name)
		roles = append(roles, m.role)
	}
	sort.Strings(names)
	sort.Strings(roles)
	if want := memberNames(t, dir); strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("the Consul UI shows the checks of members %v, the cluster has %v", names, want)
	}
	if strings.Join(roles, ",") != "leader,voter,voter" {
		t.Errorf("roles in the Consul UI: %v, want a leader and two voters", roles)
	}

	pids := memberPIDs(t, dir)
	if len(pids) != 3 {
		t.Fatalf("want 3 member processes running from the demo dir, found %v", pids)
	}
	victim := pids[0]
	alloc := memberAlloc(t, victim)
	b.open(t, consulUI)
	is = waitInstances(t, b, time.Minute, "3 passing instances again", allPassing(3))
	inst, err := instanceOf(is, alloc)
	if err != nil {
		t.Fatalf("member pid %d: %v: %s", victim, err, describe(is))
	}
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatalf("kill member pid %d: %v", victim, err)
	}
	killed := time.Now()
	// The check runs every 2 s and Nomad restarts the task after 2 s
	// (the job template, nomad/pack/etcd): critical for about 5-7 s here.
	waitInstances(t, b, time.Minute, inst.ID+" critical after its member was killed", func(is []uiInstance) bool {
		i, err := instanceOf(is, alloc)
		return err == nil && i.health() == "critical"
	})
	t.Logf("member pid %d killed: %s critical in the Consul UI after %.1fs", victim, inst.ID, time.Since(killed).Seconds())
	waitInstances(t, b, 3*time.Minute, inst.ID+" passing again, with the other two", func(is []uiInstance) bool {
		_, err := instanceOf(is, alloc)
		return err == nil && allPassing(3)(is)
	})
	t.Logf("%s passing again %.1fs after the kill", inst.ID, time.Since(killed).Seconds())
}

// memberNames are the cluster's members, from their own /status.
func memberNames(t *testing.T, dir string) []string {
	t.Helper()
	cl, _, diags := config.LoadFile(filepath.Join(dir, "cluster.hcl"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	bc, err := backends.OpenClient(cl)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := status.Gather(ctx, bc)
	if err != nil {
		t.Fatalf("members' status: %v", err)
	}
	var names []string
	for _, m := range cs.Members {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return names
}

var printedURL = regexp.MustCompile(`https?://[^\s,'"]+`)

// errorPages are what an agent answers, with 200 OK, where it has no page.
var errorPages = []string{
	"not available in this binary", // Nomad built without its UI
	"404 page not found",           // Go's http.NotFound
}

// checkPrintedAddresses opens every http(s) address up printed (its own
// lines and those of the `nomad job run` it ran): each answers 200 with no
// error page, and each UI page shows, in the browser, what it claims. The
// etcd endpoints are not web pages: checkOperatorAccess lists the members
// through them with the credentials of the printed eval line.
func checkPrintedAddresses(t *testing.T, b *browser, printed, dir string) {
	b.screenshotOnFailure(t)
	st := readState(t, dir)
	etcd := map[string]bool{}
	for _, line := range strings.Split(printed, "\n") {
		if rest, ok := strings.CutPrefix(line, "etcd endpoints:"); ok {
			for _, ep := range strings.Split(strings.TrimSpace(rest), ",") {
				etcd[ep] = true
			}
		}
	}
	if len(etcd) != 3 {
		t.Errorf("up printed %d etcd endpoints, want 3:\n%s", len(etcd), printed)
	}
	seen := map[string]bool{}
	for _, u := range printedURL.FindAllString(printed, -1) {
		if seen[u] || etcd[u] {
			continue
		}
		seen[u] = true
		if err := get(u); err != nil {
			t.Errorf("printed address %s: %v", u, err)
			continue
		}
		pu, err := url.Parse(u)
		if err != nil {
			t.Errorf("printed address %s: %v", u, err)
			continue
		}
		base := pu.Scheme + "://" + pu.Host
		mark := b.mark()
		switch {
		case !strings.HasPrefix(pu.Path, "/ui/"):
			t.Logf("printed address %s: answers", u)
		case base == st.ConsulAddr && pu.Path == "/ui/dc1/services/demo":
			b.open(t, u)
			is := waitInstances(t, b, time.Minute, "the demo's 3 instances passing", allPassing(3))
			t.Logf("printed address %s: the Consul UI lists %s", u, describe(is))
		case base == st.NomadAddr && strings.HasPrefix(pu.Path, "/ui/jobs/"+st.Job):
			b.open(t, u)
			waitPage(t, b, time.Minute, "the job "+st.Job+" with 3 running allocations", bodyText, nomadJobPage(st.Job))
			t.Logf("printed address %s: the Nomad UI shows job %s, 3/3 allocations running", u, st.Job)
		default:
			t.Errorf("printed address %s: a UI page this test does not know how to check: add it to checkPrintedAddresses", u)
		}
		if p := b.problemsSince(mark); len(p) > 0 {
			t.Errorf("printed address %s: the page reported:\n  %s", u, strings.Join(p, "\n  "))
		}
	}
	if len(seen) < 3 {
		t.Errorf("up printed %d web addresses (%v), want at least the Nomad address and the Nomad and Consul UIs", len(seen), seen)
	}
}

// nomadJobPage: the Nomad UI's job page shows the job and its 3 running
// allocations, not an error.
func nomadJobPage(job string) func(string) (bool, string) {
	return func(text string) (bool, string) {
		ok := strings.Contains(text, job) && strings.Contains(text, "3/3 Allocations Running") &&
			!strings.Contains(text, "Not Found")
		return ok, firstLines(text, 40)
	}
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

// get fetches u (following redirects): 200 and no error page.
func get(u string) error {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s (from %s): %.300s", resp.Status, resp.Request.URL, body)
	}
	low := strings.ToLower(string(body))
	for _, e := range errorPages {
		if strings.Contains(low, e) {
			return fmt.Errorf("an error page (%q, from %s): %.300s", e, resp.Request.URL, body)
		}
	}
	return nil
}

func readState(t *testing.T, dir string) state {
	t.Helper()
	b, err := os.ReadFile(statePath(dir))
	if err != nil {
		t.Fatalf("state: %v", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state: %v", err)
	}
	return st
}
