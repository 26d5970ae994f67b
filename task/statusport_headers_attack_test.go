package task

import (
	"crypto/tls"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/task/statusport"
)

// Taken over from the security review's
// TestAttackHeaderBytesHeldOnEveryConnection and inverted: it passes while
// the attack fails.
//
// Memory a network peer without a certificate makes the member hold: with
// Go's default MaxHeaderBytes (1 MiB + 4 KiB per request) each of the
// statusport.MaxConns connections could send ~1 MiB of header lines and stall
// before the blank line, held until the header timeout (5 s), renewable at
// once. statusport.MaxHeaderBytes bounds each to a few KiB: the member answers
// 431 and closes the connection once a request's headers pass it.
func TestStatusPortBoundsTheHeaderBytesOfEachConnection(t *testing.T) {
	m, cfg := statusTarget(t, false, someKeys(t))
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	line := "X-A: " + strings.Repeat("a", 8000) + "\r\n"
	chunk := []byte(strings.Repeat(line, 16)) // ~128 KiB
	var wg sync.WaitGroup
	var conns []*tls.Conn
	var mu sync.Mutex
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range statusport.MaxConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// From as many sources as the per-source cap takes.
			c, err := tls.DialWithDialer(fromSource(fmt.Sprintf("127.0.0.%d", 30+i/statusport.MaxConnsPerSource)), "tcp", statusAddr(m), cfg)
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			_ = c.SetWriteDeadline(time.Now().Add(4 * time.Second))
			fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: a\r\n")
			for range 7 { // ~896 KiB, under the 1 MiB limit; no blank line
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond)
	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	grew := int64(during.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d connections sending ~896 KiB of unfinished headers each: heap in use grew by %d MiB (process total %d MiB)",
		len(conns), grew>>20, during.HeapInuse>>20)
	// 256 connections' TLS and bufio buffers are a few MiB; the attack
	// held ~230 MiB.
	if grew > 48<<20 {
		t.Fatalf("heap grew by %d MiB while %d connections sent unfinished headers: the header bytes are not bounded", grew>>20, len(conns))
	}
}
