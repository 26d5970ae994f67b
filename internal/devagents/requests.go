package devagents

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Request is one HTTP request an agent served, from its DEBUG log.
type Request struct {
	Agent  string // "consul" or "nomad"
	Method string
	// Path is the URL path without its query.
	Path string
	// Blocking: a blocking query (the query has an index).
	Blocking bool
}

// Consul logs `agent.http: Request finished: method=GET url=/v1/kv/x?index=5
// from=...`, Nomad `http: request complete: method=GET path=/v1/x?index=5
// duration=...`.
// (quoted when the URL has a character such as &).
var requestLine = regexp.MustCompile(`(?:Request finished|request complete): method=(\S+) (?:url|path)=("[^"]*"|\S+)`)

// LogMark is a position in the logs of a host's agents.
type LogMark map[string]int64

// Mark is where h's agents' logs end now.
func (h *Host) Mark() (LogMark, error) {
	m := LogMark{}
	for _, a := range []*Agent{h.Consul, h.Nomad} {
		n, err := a.LogSize()
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", h.Name, err)
		}
		m[a.Name] = n
	}
	return m, nil
}

// Requests lists the HTTP requests h's agents served since mark (their logs
// name them only with HostsOptions.LogRequests).
func (h *Host) Requests(since LogMark) ([]Request, error) {
	var out []Request
	for _, a := range []*Agent{h.Consul, h.Nomad} {
		rs, err := a.RequestsSince(since[a.Name])
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", h.Name, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// LogSize is where the agent's log ends now, for RequestsSince.
func (a *Agent) LogSize() (int64, error) {
	fi, err := os.Stat(a.logPath())
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// RequestsSince lists the HTTP requests the agent served since its log
// was off bytes long, from its DEBUG log (a -dev agent logs at DEBUG; a
// testbed host's with HostsOptions.LogRequests).
func (a *Agent) RequestsSince(off int64) ([]Request, error) {
	f, err := os.Open(a.logPath())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	var out []Request
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := requestLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		path, query, _ := strings.Cut(strings.Trim(m[2], `"`), "?")
		blocking := false
		for _, kv := range strings.Split(query, "&") {
			if k, v, _ := strings.Cut(kv, "="); k == "index" && v != "" && v != "0" {
				blocking = true
			}
		}
		out = append(out, Request{Agent: a.Name, Method: m[1], Path: path, Blocking: blocking})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s log: %w", a.Name, err)
	}
	return out, nil
}

func (a *Agent) logPath() string { return filepath.Join(a.Dir, a.Name+".log") }
