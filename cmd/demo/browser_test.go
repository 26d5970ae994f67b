package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// chromiumNames are the names Chromium has on PATH: Debian's package
// (tools/chromium.sh installs it for `make test`), Ubuntu's, Google's.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome"}

// chromiumPath finds Chromium, and fails the test without it: `make test`
// installs it first (tools/chromium.sh), so a missing browser is a broken
// set-up, not a reason to skip.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, n := range chromiumNames {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatalf("no Chromium on PATH (%s): `make test` installs Debian's chromium first (bash tools/chromium.sh)", strings.Join(chromiumNames, ", "))
	return ""
}

// browser is a headless Chromium driven through the DevTools protocol
// (chromedp), with a fresh profile. It records what the page reports going
// wrong (console errors, uncaught exceptions, failed requests, HTTP errors)
// for the failure messages.
type browser struct {
	ctx context.Context

	mu       sync.Mutex
	problems []string
}

// newBrowser starts Chromium at path; it stops when t ends. The flags:
// headless without a sandbox (tests run as root), no GPU, and none of
// Chromium's own background connections (QUIC, component updates, sync,
// field trials): without them the browser's connections to the agents
// were refused many at a time on this machine.
func newBrowser(t *testing.T, path string) (*browser, error) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx}
	// The first action starts the browser, bound to ctx (no deadline).
	if err := chromedp.Do(ctx); err != nil {
		return nil, fmt.Errorf("start Chromium %s: %w", path, err)
	}
	urls := map[network.RequestID]string{}
	if err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			urls[e.RequestID] = e.Request.URL
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				b.problems = append(b.problems, fmt.Sprintf("HTTP %d %s", e.Response.Status, e.Response.URL))
			}
		case *network.EventLoadingFailed:
			// Navigating away cancels the page's pending blocking
			// queries: not a problem.
			if !e.Canceled {
				b.problems = append(b.problems, fmt.Sprintf("request failed: %s: %s", urls[e.RequestID], e.ErrorText))
			}
		}
	}); err != nil {
		return nil, fmt.Errorf("listen to Chromium's network events: %w", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.problems = append(b.problems, fmt.Sprintf("console %s (%s)", m, m.URL))
				b.mu.Unlock()
			}
		}
	}()
	return b, nil
}

// mark and problemsSince: what the pages reported going wrong after a mark.
func (b *browser) mark() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.problems)
}

func (b *browser) problemsSince(mark int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems[mark:]...)
}

// report is what the page reported going wrong so far.
func (b *browser) report() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.problems) == 0 {
		return "the page reported no console error and no failed request"
	}
	return "the page reported:\n  " + strings.Join(b.problems, "\n  ")
}

// screenshotOnFailure saves, when t has failed, a screenshot of the page as
// it is then and logs where (outside the test's temporary directories,
// which go with the test), with what the page reported going wrong.
func (b *browser) screenshotOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
		defer cancel()
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Logf("no screenshot of %s: %v", loc, err)
		} else {
			name := fmt.Sprintf("etcd-nomad-%s-%s.png", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().Format("20060102T150405"))
			p := filepath.Join(os.TempDir(), name)
			if err := os.WriteFile(p, png, 0o644); err != nil {
				t.Logf("screenshot of %s not saved: %v", loc, err)
			} else {
				t.Logf("screenshot of %s at the failure: %s", loc, p)
			}
		}
		t.Log(b.report())
	})
}

// saveTop saves a PNG of the top height pixels of the page at path (the
// window is 1280 wide).
func (b *browser) saveTop(path string, height float64) error {
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	r, err := chromedp.Call(ctx, page.CaptureScreenshot, page.CaptureScreenshotParams{
		Format: page.CaptureScreenshotFormatPng,
		Clip:   &page.Viewport{Width: 1280, Height: height, Scale: 1},
	})
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return os.WriteFile(path, r.Data, 0o644)
}

// open navigates to url.
func (b *browser) open(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v\n%s", url, err, b.report())
	}
}

// eval evaluates a JavaScript expression in the page into a T.
func eval[T any](b *browser, js string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](js))
}

// waitPage polls the page (every 250 ms, up to timeout) until cond, given
// the result of js, holds; cond also says what it saw, for the failure.
func waitPage[T any](t *testing.T, b *browser, timeout time.Duration, what, js string, cond func(T) (bool, string)) T {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var seen string
	for {
		v, err := eval[T](b, js)
		if err == nil {
			var ok bool
			if ok, seen = cond(v); ok {
				return v
			}
		} else {
			seen = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page did not show %s within %s; last seen: %s\n%s", what, timeout, seen, b.report())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// bodyText is the page's visible text.
const bodyText = `document.body ? document.body.innerText : ""`

// uiInstance is one row of the Consul UI's instance list of a service.
type uiInstance struct {
	ID   string `json:"id"`
	Href string `json:"href"`
	// Checks is the class of the row's service checks summary:
	// "consul-instance-checks passing" (or warning, critical).
	Checks string `json:"checks"`
	Text   string `json:"text"`
}

// health is passing, warning or critical: the row's service checks.
func (i uiInstance) health() string {
	for _, h := range []string{"critical", "warning", "passing"} {
		if strings.Contains(" "+i.Checks+" ", " "+h+" ") {
			return h
		}
	}
	return "unknown (" + i.Checks + ")"
}

// instancesJS reads the instance list of the Consul UI's service page
// (Consul v1.22.0's embedded UI: .consul-service-instance-list).
const instancesJS = `Array.from(document.querySelectorAll('.consul-service-instance-list li')).
	filter(li => li.querySelector('.header a')).
	map(li => ({
		id: li.querySelector('.header a').textContent.trim(),
		href: li.querySelector('.header a').href,
		checks: (li.querySelector('dl.consul-instance-checks') || {className: ''}).className,
		text: li.innerText.replace(/\s+/g, ' ').trim(),
	}))`

func describe(is []uiInstance) string {
	if len(is) == 0 {
		return "no instance listed"
	}
	var out []string
	for _, i := range is {
		if i.health() == "passing" {
			out = append(out, i.ID+": passing")
		} else {
			out = append(out, fmt.Sprintf("%s: %s [%s]", i.ID, i.health(), i.Text))
		}
	}
	return strings.Join(out, "; ")
}

// waitInstances polls the service page until cond holds for its instance
// list.
func waitInstances(t *testing.T, b *browser, timeout time.Duration, what string, cond func([]uiInstance) bool) []uiInstance {
	t.Helper()
	return waitPage(t, b, timeout, what, instancesJS, func(is []uiInstance) (bool, string) {
		return cond(is), describe(is)
	})
}

// allPassing: n instances, each with its service checks passing.
func allPassing(n int) func([]uiInstance) bool {
	return func(is []uiInstance) bool {
		if len(is) != n {
			return false
		}
		for _, i := range is {
			if i.health() != "passing" {
				return false
			}
		}
		return true
	}
}

// uiCheck is one health check on the Consul UI's page of an instance.
type uiCheck struct {
	Name string `json:"name"`
	// Class is "health-check-output passing" (or warning, critical).
	Class  string `json:"class"`
	Output string `json:"output"`
}

const checksJS = `Array.from(document.querySelectorAll('.consul-health-check-list li.health-check-output')).
	map(li => ({
		name: (li.querySelector('h2') || {textContent: ''}).textContent.trim(),
		class: li.className,
		output: (li.querySelector('code') || {textContent: ''}).textContent.trim(),
	}))`

// memberHealth is the output of a member's /health that Consul shows as its
// check's output (task/server.go).
var memberHealth = regexp.MustCompile(`Output: healthy: (\S+) role=(leader|voter|learner) revision=(\d+) db_size=(\d+)`)

// uiMember is what the Consul UI shows of one member: its instance and the
// output of its passing check.
type uiMember struct {
	instance, name, role, revision, dbSize string
}

// checkOutputs opens each instance's health checks page and waits for its
// member check, passing, with the member's name, role, revision and DB
// size in the output.
func checkOutputs(t *testing.T, b *browser, is []uiInstance) []uiMember {
	t.Helper()
	var out []uiMember
	for _, i := range is {
		b.open(t, strings.TrimSuffix(i.Href, "/")+"/health-checks")
		var m []string
		waitPage(t, b, time.Minute, "the passing member check of "+i.ID+" with role, revision and DB size", checksJS, func(cs []uiCheck) (bool, string) {
			var seen []string
			for _, c := range cs {
				seen = append(seen, fmt.Sprintf("%s (%s): %s", c.Name, c.Class, c.Output))
				if c.Name == "etcd member health" && strings.Contains(c.Class, "passing") {
					if m = memberHealth.FindStringSubmatch(c.Output); m != nil {
						return true, ""
					}
				}
			}
			return false, strings.Join(seen, "; ")
		})
		out = append(out, uiMember{instance: i.ID, name: m[1], role: m[2], revision: m[3], dbSize: m[4]})
	}
	return out
}

var allocID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// memberAlloc is the allocation of a member process, read from its command
// line (-config <alloc dir>/<alloc id>/etcd/local/cluster.hcl).
func memberAlloc(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("member pid %d: %v", pid, err)
	}
	id := allocID.FindString(strings.ReplaceAll(string(b), "\x00", " "))
	if id == "" {
		t.Fatalf("member pid %d: no allocation id in its command line %q", pid, b)
	}
	return id
}

var errNoInstance = errors.New("no such instance")

// instanceOf is the row of the allocation's service instance (Nomad names
// it _nomad-task-<alloc id>-…).
func instanceOf(is []uiInstance, alloc string) (uiInstance, error) {
	for _, i := range is {
		if strings.HasPrefix(i.ID, "_nomad-task-"+alloc+"-") {
			return i, nil
		}
	}
	return uiInstance{}, fmt.Errorf("%w for allocation %s", errNoInstance, alloc)
}
